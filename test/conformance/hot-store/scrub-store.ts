/**
 * The scrub store (src/ports/scrub-store.ts) on the SQL hot store: the
 * scrub's order and its keyset walk, the marks conditional on the version
 * verified, and the run record.
 */
import { describe, expect, it } from "vitest";
import { scrubStoreOf } from "../../../src/adapters/sql/scrub-store.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import type { ScrubCursor, ScrubStore, VerifiedVersion } from "../../../src/ports/scrub-store.js";
import type { SqlHotStore } from "../../../src/adapters/sql/index.js";
import { METADATA_TABLE } from "../../../src/adapters/sql/migrations.js";
import { advanceTo, bytes, hotBucket, later, newTable, NOW } from "./support.js";

const key = (id: BucketId) => `${Buffer.from(id.partitionKey).toString("hex")}/${id.bucketKey}`;

export function scrubStoreConformance(store: () => HotStore): void {
  describe("scrub store", () => {
    const scrubs = (): ScrubStore => scrubStoreOf(store())!;

    async function archivedBuckets(label: string, n: number) {
      const s = store();
      const tableId = await newTable(s, label);
      const ids: BucketId[] = [];
      for (let i = 0; i < n; i++) {
        const id = await hotBucket(s, tableId, bytes(i + 1));
        await advanceTo(s, id, "cleanup");
        ids.push(id);
      }
      return { tableId, ids };
    }

    async function versionOf(id: BucketId): Promise<VerifiedVersion> {
      const m = (await store().getBucket(id))!;
      return {
        id,
        generation: m.generation,
        manifestKey: m.manifestKey!,
        marksSeen: m.corruptMarks,
      };
    }

    it("publish records the verification time; the walk takes never-verified buckets first, then least recently verified, page by page, none verified after the run began", async () => {
      const { tableId, ids } = await archivedBuckets("scrub-order", 6);
      for (const id of ids) expect((await store().getBucket(id))?.verifiedAt).toEqual(NOW);
      const [a, b, c, d, e, f] = ids as [
        BucketId,
        BucketId,
        BucketId,
        BucketId,
        BucketId,
        BucketId,
      ];
      expect(await scrubs().recordVerified(await versionOf(a), later(NOW, 3000))).toBe("recorded");
      expect(await scrubs().recordVerified(await versionOf(b), later(NOW, 1000))).toBe("recorded");
      expect(await scrubs().recordVerified(await versionOf(c), later(NOW, 9000))).toBe("recorded");
      // A bucket published by a release before migration 11 has no verification time.
      const sql = store() as SqlHotStore;
      await sql.db.write(
        `UPDATE ${METADATA_TABLE} SET verified_at = NULL WHERE table_id = $1::TEXT AND partition_key = $2::BYTEA`,
        [tableId, Buffer.from(e.partitionKey)],
        "test",
      );
      const runStart = later(NOW, 5000);
      const walked: string[] = [];
      let after: ScrubCursor | undefined;
      for (;;) {
        const page = await scrubs().candidates({
          tableId,
          limit: 2,
          after,
          verifiedBefore: runStart,
        });
        walked.push(...page.map((p) => key(p.id)));
        if (page.length < 2) break;
        const last = page[page.length - 1]!;
        after = { verifiedAt: last.verifiedAt, id: last.id };
      }
      // e (never), then d and f (NOW, by key), b (+1 s), a (+3 s); c (+9 s) is after the run began.
      expect(walked).toEqual([e, d, f, b, a].map(key));
      expect(await scrubs().countArchived(tableId)).toBe(6);
      expect(await scrubs().countDue(later(NOW, 2000), tableId)).toBe(4);
    });

    it("marks land only on the version that was verified; a mark keeps its first time until a verification passes", async () => {
      const { ids } = await archivedBuckets("scrub-marks", 1);
      const id = ids[0]!;
      const version = await versionOf(id);
      const stale = { ...version, generation: version.generation - 1 };
      expect(await scrubs().markCorrupt(stale, NOW, "stale")).toBe(false);
      expect(
        await scrubs().markCorrupt({ ...version, manifestKey: "m/other.json" }, NOW, "x"),
      ).toBe(false);
      expect((await store().getBucket(id))?.corruption).toBeNull();

      expect(await scrubs().markCorrupt(version, later(NOW, 1000), "payload missing")).toBe(true);
      expect(await scrubs().markCorrupt(version, later(NOW, 2000), "payload still missing")).toBe(
        true,
      );
      expect((await store().getBucket(id))?.corruption).toEqual({
        at: later(NOW, 1000),
        problem: "payload still missing",
      });
      const listed = await scrubs().corruptBuckets(1000);
      expect(listed.buckets.map((c) => key(c.id))).toContain(key(id));
      expect(listed.total).toBeGreaterThanOrEqual(1);

      expect(await scrubs().recordVerified(stale, later(NOW, 3000))).toBe("changed");
      expect((await store().getBucket(id))?.corruption).not.toBeNull();
      // A verification that read the bucket after both marks may clear them.
      const seenAfterMarks = await versionOf(id);
      expect(seenAfterMarks.marksSeen).toBe(version.marksSeen + 2);
      expect(await scrubs().recordVerified(seenAfterMarks, later(NOW, 3000))).toBe("recorded");
      const after = await store().getBucket(id);
      expect(after?.corruption).toBeNull();
      expect(after?.verifiedAt).toEqual(later(NOW, 3000));
    });

    it("a verification that read the bucket before a mark landed never clears that mark, however late its clock", async () => {
      const { ids } = await archivedBuckets("scrub-stale-pass", 1);
      const id = ids[0]!;
      const slowPass = await versionOf(id);
      expect(await scrubs().markCorrupt(slowPass, later(NOW, 5000), "payload hashes to …")).toBe(
        true,
      );
      // The slow pass records with a clock far ahead of the mark's: still refused.
      expect(await scrubs().recordVerified(slowPass, later(NOW, 3_600_000))).toBe("marked-since");
      const after = (await store().getBucket(id))!;
      expect(after.corruption).toEqual({ at: later(NOW, 5000), problem: "payload hashes to …" });
      expect(after.verifiedAt).toEqual(NOW);
      // A mark on a bucket already marked still counts as one more.
      const marked = await versionOf(id);
      expect(await scrubs().markCorrupt(marked, later(NOW, 6000), "again")).toBe(true);
      expect(await scrubs().recordVerified(marked, later(NOW, 7000))).toBe("marked-since");
      expect((await store().getBucket(id))?.corruptMarks).toBe(slowPass.marksSeen + 2);
    });

    it("records runs per archive root, keeping the last completion across incomplete runs", async () => {
      const root = `root-${Math.random().toString(36).slice(2, 8)}`;
      expect(await scrubs().readRun(root)).toBeNull();
      await scrubs().recordRun(root, { at: NOW, verified: 5, corrupt: 0, completed: true });
      await scrubs().recordRun(root, {
        at: later(NOW, 1000),
        verified: 2,
        corrupt: 1,
        completed: false,
      });
      expect(await scrubs().readRun(root)).toEqual({
        root,
        lastRunAt: later(NOW, 1000),
        lastRunVerified: 2,
        lastRunCorrupt: 1,
        lastCompletedAt: NOW,
      });
    });
  });
}
