/**
 * Cleanup's three reads before its first delete (the manifest, each part's
 * HEAD, the query catalog's entry) are independent and go out together
 * (issue 52): one S3 latency instead of three. What the entry's read found
 * is acted on only once the archive's checks passed, so a damaged archive
 * still stops cleanup before it writes anything or deletes a hot row.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { Gate } from "../../support/gates.js";
import { onlyPart } from "../../support/one-part.js";
import { hostileRecords } from "../../support/catalog.js";
import { makeHarness, seedTable, type Harness } from "../../support/workflow-harness.js";

const TABLE = parseTableId("together");

/** `inner` with manifest reads held at `gate`, and a log of the reads as they start. */
function watched(inner: ObjectStore, gate: Gate, log: string[]): ObjectStore {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== "function") return value;
      const method = (value as (...args: unknown[]) => Promise<unknown>).bind(target);
      if (prop !== "get" && prop !== "head") return method;
      return async (key: string, ...rest: unknown[]) => {
        const kind = key.includes("/manifests/")
          ? "manifest"
          : key.includes("/catalog/")
            ? "catalog"
            : "part";
        log.push(`${String(prop)} ${kind}`);
        if (kind === "manifest") await gate.pass();
        return await method(key, ...rest);
      };
    },
  });
}

describe("cleanup's reads", () => {
  let h: Harness;
  let id: BucketId;

  /** Run the bucket's phases until cleanup is next. */
  const publish = async () => {
    for (let step = 0; step < 6; step++) {
      const outcome = await runNextPhase(h.process().ctx, id);
      if (outcome.next === "cleanup") return;
    }
    throw new Error("the bucket did not reach cleanup");
  };

  beforeEach(async () => {
    h = await makeHarness();
    // Long, empty and every-byte partition keys: the first bucket's key is the seed's own oddity.
    const buckets = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      hostileRecords([3], 3),
    );
    id = [...buckets.values()][0]!.id;
    await publish();
  });
  afterEach(async () => {
    await h.close();
  });

  it("send the catalog entry's read and the part's HEAD while the manifest's read is in flight", async () => {
    const gate = new Gate();
    const log: string[] = [];
    const { ctx } = h.process();
    const cleanup = runNextPhase({ ...ctx, objectStore: watched(h.objects, gate, log) }, id);
    await gate.whenReached();
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    // One after another, nothing else would be read before the manifest's read returned.
    expect([...log].sort()).toEqual(["get catalog", "get manifest", "head part"]);
    gate.open();
    expect(await cleanup).toMatchObject({ phase: "cleanup", result: "advanced", next: null });
    expect(await h.inner.countHotRows(id)).toBe(0);
  });

  it("with a part lost and the entry missing, write no entry and delete no hot row", async () => {
    const hot = await h.inner.countHotRows(id);
    const part = await onlyPart(h.inner, id);
    const entries = (await h.objects.list("archive/catalog/")).objects.map((o) => o.key);
    expect(entries.length).toBeGreaterThan(0);
    for (const key of entries) await h.objects.delete(key);
    await h.objects.delete(part.key);

    const outcome = await runNextPhase(h.process().ctx, id);

    expect(outcome.result).not.toBe("advanced");
    expect(String(outcome.reason)).toMatch(/missing/);
    expect((await h.objects.list("archive/catalog/")).objects).toEqual([]);
    expect(await h.inner.countHotRows(id)).toBe(hot);
  });
});
