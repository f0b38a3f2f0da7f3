/**
 * GC collects the probe objects the deployed functions leave under
 * `{prefix}/probe/` (functions/probe.ts), as it collects any object nothing
 * needs: old ones go, young ones stay, a dry run only lists them, and
 * nothing outside the probe prefix and the archive layout is touched.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import { ManualClock } from "../../../src/ports/clock.js";
import { silentLog } from "../../../src/usecases/context.js";
import { collectGarbage } from "../../../src/usecases/gc.js";
import { probePrefix } from "../../../src/usecases/gc-probes.js";
import { makeHarness, type Harness } from "../../support/workflow-harness.js";

let h: Harness;
beforeAll(async () => {
  h = await makeHarness();
}, 120_000);
afterAll(async () => {
  await h?.close();
});

const HOUR = 3_600_000;

async function run(objects: MemoryObjectStore, minAgeMs: number, dryRun = false) {
  // The memory store stamps objects with the real time: GC's clock runs two hours later.
  const clock = new ManualClock(new Date(Date.now() + 2 * HOUR));
  return await collectGarbage(
    { hotStore: h.inner, objectStore: objects, clock, archivePrefix: "arch/ive", log: silentLog },
    { minAgeMs, dryRun, leaseMs: 60_000 },
  );
}

describe("the functions' probe objects", () => {
  it("are deleted by GC once older than its safety age, listed by a dry run, and kept while young; other keys are not touched", async () => {
    const objects = new MemoryObjectStore();
    const probes = [
      `${probePrefix("arch/ive")}Pulpitum-WorkerFunction/2026-12-06T00:00:00.000Z-a.json`,
      `${probePrefix("arch/ive")}Pulpitum-EraseFunction/2026-12-06T00:00:00.000Z-b.json`,
    ].sort();
    for (const key of probes) await objects.createIfAbsent(key, new TextEncoder().encode("{}"));
    const elsewhere = "arch/ive/pulpitum-doctor/probe-x";
    await objects.createIfAbsent(elsewhere, new Uint8Array([1]));

    const young = await run(objects, 3 * HOUR);
    expect(young.deleted_objects).toBe(0);
    expect(young.kept.young).toBe(2);
    const dry = await run(objects, HOUR, true);
    expect(dry.orphans.map((o) => [o.key, o.action])).toEqual(
      probes.map((key) => [key, "would-delete"]),
    );
    expect((await objects.list(probePrefix("arch/ive"))).objects).toHaveLength(2);

    const collected = await run(objects, HOUR);

    expect(collected.deleted_objects).toBe(2);
    expect(collected.deleted_bytes).toBe(4);
    expect(collected.orphans.map((o) => [o.key, o.action, o.bucket])).toEqual(
      probes.map((key) => [key, "deleted", null]),
    );
    expect((await objects.list("arch/ive/")).objects.map((o) => o.key)).toEqual([elsewhere]);
  });
});
