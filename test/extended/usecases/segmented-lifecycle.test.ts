/**
 * A multi-part bucket through the rest of its life, on the real filesystem
 * object store and the real SQL hot store: DuckDB reads every part, garbage
 * collection keeps every part during and after export, a deferral at seal
 * forgets the parts and the bucket archives again, and restore copies every
 * part's rows back exactly once.
 */
import { mkdtempSync, rmSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { DuckDBInstance, type DuckDBBlobValue } from "@duckdb/node-api";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { validateArchiveManifest, type ManifestV5 } from "../../../src/archive/manifest-v5.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { GcReport } from "../../../src/usecases/gc.js";
import { restoreBucket } from "../../../src/usecases/restore.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  collectOn,
  chatRecords,
  converge,
  expectFullyArchived,
  expectSameRecords,
  harnessOn,
  readBucketAsReader,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const DAY = 86_400_000;

describe("a bucket archived in several parts", () => {
  let dir: string;
  let h: Harness<FileObjectStore>;
  let id: BucketId;
  let records: TableRecord[];
  const expected = () => new Map([["solo", { id, records }]]);

  const keys = async () => {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const page = await h.objects.list("archive/", { continuationToken: token });
      out.push(...page.objects.map((o) => o.key));
      token = page.continuationToken;
    } while (token !== undefined);
    return out;
  };
  const ageAll = async (ageMs: number) => {
    const when = new Date(h.clock.now().getTime() - ageMs);
    for (const key of await keys()) utimesSync(path.join(dir, key), when, when);
  };
  const gc = (): Promise<GcReport> => collectOn(h, DAY);
  const manifestOf = async () => {
    const m = (await h.inner.getBucket(id))!;
    return validateArchiveManifest(await h.objects.get(m.manifestKey!)) as ManifestV5;
  };

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-segments-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir), {
      segmentRows: 400,
      snapshotPageSize: 150,
    });
    const seeded = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([3], 1000, ["solo"]),
    );
    ({ id, records } = [...seeded.values()][0]!);
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("DuckDB reads every part of a multi-part bucket and gets the bucket's rows in order", async () => {
    await converge(h, expected());
    const manifest = await manifestOf();
    expect(manifest.parts.map((p) => p.row_count)).toEqual([400, 400, 200]);
    const files = manifest.parts.map((p) => `'${path.join(dir, p.payload_key)}'`).join(", ");
    const db = await DuckDBInstance.create(":memory:");
    const connection = await db.connect();
    try {
      const result = await connection.runAndReadAll(
        `SELECT partition_key, epoch_ns(event_time) AS ns, sort_key, value
           FROM read_parquet([${files}]) ORDER BY ns, sort_key`,
      );
      const got = result.getRows();
      expect(got.length).toBe(records.length);
      const blob = (v: unknown) => Buffer.from((v as DuckDBBlobValue).bytes);
      const mismatch = got.findIndex((row, i) => {
        const want = records[i]!;
        return (
          !blob(row[0]).equals(Buffer.from(want.partitionKey)) ||
          row[1] !== want.eventTime * 1000n ||
          !blob(row[2]).equals(Buffer.from(want.sortKey)) ||
          !blob(row[3]).equals(Buffer.from(want.value))
        );
      });
      expect(mismatch).toBe(-1);
    } finally {
      connection.closeSync();
      db.closeSync();
    }
  });

  it("garbage collection keeps every recorded part while the export runs and after it is published, however old", async () => {
    const { ctx } = h.process();
    await runNextPhase(ctx, id); // claim
    await runNextPhase(ctx, id, { deadline: h.clock.now() }); // part 0
    await runNextPhase(ctx, id, { deadline: h.clock.now() }); // part 1
    const recorded = (await h.inner.listParts(id)).map((p) => p.key);
    expect(recorded).toHaveLength(2);
    await ageAll(365 * DAY);
    expect(await gc()).toMatchObject({ deleted_objects: 0, kept: { referenced: 2 } });
    expect(await keys()).toEqual(expect.arrayContaining(recorded));

    await converge(h, expected());
    await expectFullyArchived(h, expected());
    await ageAll(365 * DAY);
    expect(await gc()).toMatchObject({ deleted_objects: 0 });
    const parts = (await manifestOf()).parts.map((p) => p.payload_key);
    expect(parts.slice(0, 2)).toEqual(recorded);
    expect(await keys()).toEqual(expect.arrayContaining(parts));
    await expectFullyArchived(h, expected());
  });

  it("a failure at seal defers the bucket, forgets its parts, and it archives again under new part keys", async () => {
    const { ctx } = h.process({
      object: {
        operation: "createIfAbsent",
        when: "before",
        kind: "error",
        keyIncludes: "/manifests/",
      },
    });
    await runNextPhase(ctx, id); // claim
    await runNextPhase(ctx, id); // export: three parts
    const first = (await h.inner.listParts(id)).map((p) => p.key);
    expect(first).toHaveLength(3);
    expect(await runNextPhase(ctx, id)).toMatchObject({ phase: "seal", result: "deferred" });
    expect(await h.inner.listParts(id)).toEqual([]);
    expect((await h.inner.getBucket(id))!).toMatchObject({ state: "hot", exported: null });
    expectSameRecords(await readBucketAsReader(h, id), records);

    h.clock.advance(h.settings.retryMs + 1);
    await converge(h, expected());
    await expectFullyArchived(h, expected());
    const again = (await manifestOf()).parts.map((p) => p.payload_key);
    expect(again.some((k) => first.includes(k))).toBe(false);
  });

  it("restore verifies every part and copies each record back exactly once, and the bucket archives again", async () => {
    await converge(h, expected());
    const report = await restoreBucket(h.process().ctx, id, { holdMs: 1000, batchRows: 170 });
    expect(report).toMatchObject({ result: "restored", rows_inserted: records.length });
    expect(await h.inner.countHotRows(id)).toBe(records.length);
    expect(await h.inner.listParts(id)).toEqual([]);
    expectSameRecords(await readBucketAsReader(h, id), records);

    h.clock.advance(2000);
    await converge(h, expected());
    await expectFullyArchived(h, expected());
    expect((await h.inner.getBucket(id))!.exported?.parts).toBe(3);
  });
});
