/**
 * The GC progress port (src/ports/gc-progress.ts) against every adapter:
 * PGlite in the unit suite, real PostgreSQL in the integration suite. Each
 * test uses archive roots of its own, so one store serves the file.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GcPassLease, GcProgressStore } from "../../src/ports/gc-progress.js";

export interface OpenedGcProgress {
  readonly progress: GcProgressStore;
  cleanup(): Promise<void>;
}

const LEASE_MS = 60_000;
const NOW = new Date("2026-06-01T00:00:00.000Z");
const at = (ms: number) => new Date(NOW.getTime() + ms);
let counter = 0;
const newRoot = () => `gc-${++counter}-${Math.random().toString(36).slice(2, 8)}/v4/`;

export function gcProgressConformance(name: string, open: () => Promise<OpenedGcProgress>): void {
  describe(`GC progress: ${name}`, () => {
    let progress: GcProgressStore;
    let cleanup: () => Promise<void>;
    beforeAll(async () => {
      ({ progress, cleanup } = await open());
    }, 60_000);
    afterAll(async () => {
      await cleanup?.();
    });

    const acquired = async (root: string, now = NOW): Promise<GcPassLease> => {
      const r = await progress.acquirePass(root, now, LEASE_MS);
      if (r.kind !== "acquired") throw new Error(`expected the GC lease, got ${r.kind}`);
      return r.lease;
    };

    it("starts a root's first pass from the beginning, holding its lease", async () => {
      const root = newRoot();
      expect(await progress.readPass(root)).toBeNull();
      const r = await progress.acquirePass(root, NOW, LEASE_MS);
      expect(r).toMatchObject({
        kind: "acquired",
        lease: { root, generation: 1, expiresAt: at(LEASE_MS) },
        pass: { root, resumeAfter: null, passesFinished: 0, lastPassFinishedAt: null },
      });
    });

    it("refuses a second run while the first holds a live lease, and lets it take over once the lease expired", async () => {
      const root = newRoot();
      const first = await acquired(root);
      expect(await progress.acquirePass(root, at(LEASE_MS - 1), LEASE_MS)).toEqual({
        kind: "busy",
        expiresAt: at(LEASE_MS),
      });
      const second = await acquired(root, at(LEASE_MS));
      expect(second.generation).toBe(first.generation + 1);
      expect(second.token).not.toBe(first.token);
    });

    it("grants the lease to exactly one of two runs starting at once", async () => {
      const root = newRoot();
      const results = await Promise.all([
        progress.acquirePass(root, NOW, LEASE_MS),
        progress.acquirePass(root, NOW, LEASE_MS),
      ]);
      expect(results.map((r) => r.kind).sort()).toEqual(["acquired", "busy"]);
    });

    it("saves the position and extends the lease at a checkpoint; the next run resumes there", async () => {
      const root = newRoot();
      const lease = await acquired(root);
      const saved = await progress.checkpoint(lease, "a/b/c", at(40_000), LEASE_MS);
      expect(saved).toEqual({ kind: "saved", lease: { ...lease, expiresAt: at(100_000) } });
      // Still held at the old expiry: the checkpoint extended it.
      expect((await progress.acquirePass(root, at(LEASE_MS), LEASE_MS)).kind).toBe("busy");
      await progress.releasePass(lease);
      const next = await progress.acquirePass(root, at(41_000), LEASE_MS);
      expect(next).toMatchObject({ kind: "acquired", pass: { resumeAfter: "a/b/c" } });
      if (next.kind !== "acquired") return;
      const before = await progress.readPass(root);
      expect(next.pass.passId).toBe(before!.passId);
    });

    it("refuses the checkpoint of a run whose lease expired or was taken over, keeping the saved position", async () => {
      const root = newRoot();
      const stalled = await acquired(root);
      await progress.checkpoint(stalled, "k/1", at(1000), LEASE_MS);
      expect(await progress.checkpoint(stalled, "k/2", at(61_000), LEASE_MS)).toEqual({
        kind: "lease-lost",
      });
      const taker = await acquired(root, at(61_000));
      expect(await progress.checkpoint(stalled, "k/3", at(62_000), LEASE_MS)).toEqual({
        kind: "lease-lost",
      });
      expect(await progress.finishPass(stalled, at(62_000))).toEqual({ kind: "lease-lost" });
      await progress.releasePass(stalled);
      expect((await progress.readPass(root))!.resumeAfter).toBe("k/1");
      expect((await progress.acquirePass(root, at(62_000), LEASE_MS)).kind).toBe("busy");
      expect((await progress.checkpoint(taker, "k/4", at(62_000), LEASE_MS)).kind).toBe("saved");
    });

    it("starts a new pass from the beginning once a pass finished, counting it", async () => {
      const root = newRoot();
      const lease = await acquired(root);
      const first = (await progress.readPass(root))!;
      await progress.checkpoint(lease, "z/9", at(1000), LEASE_MS);
      expect(await progress.finishPass(lease, at(2000))).toEqual({ kind: "finished" });
      const after = (await progress.readPass(root))!;
      expect(after).toMatchObject({
        resumeAfter: null,
        passesFinished: 1,
        lastPassFinishedAt: at(2000),
        passStartedAt: at(2000),
      });
      expect(after.passId).not.toBe(first.passId);
      // Released: the next run starts at once.
      const next = await progress.acquirePass(root, at(3000), LEASE_MS);
      expect(next).toMatchObject({
        kind: "acquired",
        pass: { resumeAfter: null, passesFinished: 1 },
      });
    });

    it("keeps the passes of different archive roots apart", async () => {
      const a = newRoot();
      const b = newRoot();
      const la = await acquired(a);
      await progress.checkpoint(la, "a-key", NOW, LEASE_MS);
      const rb = await progress.acquirePass(b, NOW, LEASE_MS);
      expect(rb).toMatchObject({ kind: "acquired", pass: { resumeAfter: null } });
    });
  });
}
