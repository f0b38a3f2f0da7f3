/**
 * A garbage-collection pass that outlives its minimum age inside one table
 * while the fleet archives, publishes and cleans buckets of that table: what
 * was created after the pass read the table's references is never deleted,
 * recorded parts are references under the bucket's lease too, and
 * `--include-unowned` deletes nothing of a bucket that got a metadata row
 * during the pass. Real filesystem store (modification times set by the
 * test) and the real SQL hot store on PGlite.
 */
import { mkdtempSync, rmSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import * as port from "../../../src/ports/object-store.js";
import { silentLog } from "../../../src/usecases/context.js";
import { collectGarbage, type GcOptions, type GcReport } from "../../../src/usecases/gc.js";
import { OneKeyPages, referencesHook } from "../../support/gc-hooks.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const DAY = 86_400_000;
const HOUR = 3_600_000;

type Expected = Map<string, { id: BucketId; records: TableRecord[] }>;

describe("a long garbage-collection pass beside the fleet", () => {
  let dir: string;
  let h: Harness<FileObjectStore>;

  const keys = async (under = "archive/v4/") => {
    const out: string[] = [];
    for await (const o of port.listAll(h.objects, under)) out.push(o.key);
    return out;
  };
  /** Set every archive object's modification time to `ageMs` before the test clock. */
  const ageAll = async (ageMs: number) => {
    const when = new Date(h.clock.now().getTime() - ageMs);
    for (const key of await keys()) utimesSync(path.join(dir, key), when, when);
  };
  const gc = (hotStore: HotStore, options: Partial<GcOptions> = {}): Promise<GcReport> =>
    collectGarbage(
      {
        hotStore,
        objectStore: new OneKeyPages(h.objects),
        clock: h.clock,
        archivePrefix: h.settings.archivePrefix,
        log: silentLog,
      },
      { minAgeMs: DAY, dryRun: false, leaseMs: h.settings.leaseMs, ...options },
    );

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-gc-long-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir), { segmentRows: 20 });
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Partition "a" is archived long ago; the pass reads the table's
   * references while partition "b" is hot (or, with `seedLate`, does not
   * exist yet). Meanwhile the fleet archives "b" in parts and cleans it, and
   * the pass goes on past its minimum age before it lists b's objects.
   */
  async function archiveDuringPass(options: {
    readonly seedLate: boolean;
    readonly gc: Partial<GcOptions>;
  }): Promise<{ report: GcReport; a: Expected; b: Expected; bKeys: string[] }> {
    const a = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", chatRecords([3], 60, ["a"]));
    await converge(h, a);
    await ageAll(30 * DAY);
    let b: Expected = new Map();
    const seedB = async () =>
      (b = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", chatRecords([3], 60, ["b"])));
    if (!options.seedLate) await seedB();
    let bKeys: string[] = [];
    const hotStore = referencesHook(h.inner, async (page) => {
      if (options.seedLate) await seedB();
      await converge(h, b);
      bKeys = (await keys()).filter((k) => !k.includes("/YQ/"));
      // The objects appeared half an hour after the references were read,
      // and the pass reaches them a day later.
      await ageAll(-HOUR / 2);
      h.clock.advance(DAY + HOUR);
      return page;
    });
    const report = await gc(hotStore, options.gc);
    return { report, a, b, bKeys };
  }

  it("never deletes the parts of a multi-part bucket archived, published and cleaned during the pass", async () => {
    const { report, b, bKeys } = await archiveDuringPass({ seedLate: false, gc: {} });
    expect(bKeys.filter((k) => k.includes("/payloads/")).length).toBeGreaterThanOrEqual(3);
    expect(report.deleted_objects).toBe(0);
    for (const key of bKeys) expect(await keys()).toContain(key);
    await expectFullyArchived(h, b);
  });

  it("with --include-unowned, never deletes a bucket that had no metadata row when the references were read", async () => {
    const { report, b, bKeys } = await archiveDuringPass({
      seedLate: true,
      gc: { includeUnowned: true },
    });
    expect(bKeys.some((k) => k.includes("/manifests/"))).toBe(true);
    expect(report.deleted_objects).toBe(0);
    for (const key of bKeys) expect(await keys()).toContain(key);
    await expectFullyArchived(h, b);
  });

  it("the bucket's lease re-check counts recorded parts as references even when the table's references missed them", async () => {
    const a = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", chatRecords([3], 60, ["a"]));
    await converge(h, a);
    await ageAll(30 * DAY);
    const parts = (await keys()).filter((k) => k.includes("/payloads/"));
    expect(parts.length).toBe(3);
    // A references page that lost the parts (a stale or partial read): only
    // the re-read under the bucket's lease stands between GC and the parts.
    const blind = referencesHook(h.inner, (page) =>
      Promise.resolve(page.map((r) => ({ ...r, payloadKeys: [] }))),
    );
    const report = await gc(blind);
    expect(report.deleted_objects).toBe(0);
    expect(report.kept.referenced).toBeGreaterThanOrEqual(4);
    await expectFullyArchived(h, a);
  });

  it("still deletes an orphan that was old when the references were read, on a long pass", async () => {
    const a = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", chatRecords([3], 60, ["a"]));
    await converge(h, a);
    const stray = `archive/v4/chat/YQ/month:2025-03/payloads/${"e".repeat(64)}.parquet`;
    await h.objects.createIfAbsent(stray, new TextEncoder().encode("stray"));
    await ageAll(30 * DAY);
    const hotStore = referencesHook(h.inner, (page) => {
      h.clock.advance(DAY + HOUR);
      return Promise.resolve(page);
    });
    const report = await gc(hotStore);
    expect(report.orphans).toEqual([expect.objectContaining({ key: stray, action: "deleted" })]);
    await expectFullyArchived(h, a);
  });
});
