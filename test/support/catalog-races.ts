/**
 * The query catalog under delays, on any adapters: a catalog write that read the bucket's
 * metadata long before it lands (a stalled request, a paused process) never
 * brings back a replaced version, never leaves a bucket listed twice, and
 * never removes a published bucket's entry. Each case queries the table
 * through the catalog with DuckDB (`pulpitum query`'s path) and counts what
 * a consumer would see. Real SQL hot store (PGlite), real filesystem store.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ForwardingObjectStore } from "../../src/adapters/object-store/forwarding.js";
import type { BucketId } from "../../src/domain/bucket.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseTableId } from "../../src/domain/table.js";
import type { HotStore } from "../../src/ports/hot-store.js";
import type * as port from "../../src/ports/object-store.js";
import { queryArchive } from "../../src/read/query-archive.js";
import { jsonValue } from "../../src/read/query-values.js";
import { silentLog } from "../../src/usecases/context.js";
import { collectGarbage } from "../../src/usecases/gc.js";
import { restoreBucket } from "../../src/usecases/restore.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import { expectCatalogMatchesPublished } from "./catalog.js";
import { chatRecords, converge, seedTable, type Harness } from "./workflow-harness.js";
import { onlyPart } from "./one-part.js";
import { setDatabaseClock } from "./database-clock.js";

const TABLE = parseTableId("chat");
export const PREFIX = "archive";
const DAY = 86_400_000;

/** Runs `hook` once, before the first write of a catalog entry, and then lets the write go on. */
class StalledCatalogWrite extends ForwardingObjectStore {
  #pending: (() => Promise<void>) | null;
  constructor(inner: port.ObjectStore, hook: () => Promise<void>) {
    super(inner);
    this.#pending = hook;
  }
  async #stall(key: string): Promise<void> {
    if (!key.includes("/catalog/") || this.#pending === null) return;
    const hook = this.#pending;
    this.#pending = null;
    await hook();
  }
  override async createIfAbsent(
    key: string,
    body: port.ObjectBody,
    options?: port.CreateOptions,
  ): Promise<port.CreateResult> {
    await this.#stall(key);
    return await super.createIfAbsent(key, body, options);
  }
  override async replace(
    key: string,
    body: Uint8Array,
    options?: port.CreateOptions,
  ): Promise<void> {
    await this.#stall(key);
    await super.replace(key, body, options);
  }
  override async delete(key: string): Promise<void> {
    await this.#stall(key);
    await super.delete(key);
  }
  override async head(key: string): Promise<port.ObjectInfo | null> {
    await this.#stall(key);
    return await super.head(key);
  }
}

/** A fresh world for one case: a hot store and an object store with nothing archived under PREFIX. */
export type OpenCatalogWorld = () => Promise<{
  readonly h: Harness<port.ObjectStore>;
  readonly close: () => Promise<void>;
}>;

export function catalogRaceSuite(name: string, open: OpenCatalogWorld): void {
  describe(`the query catalog under delays: ${name}`, () => {
    let temp: string;
    let h: Harness<port.ObjectStore>;
    let close: () => Promise<void>;
    let id: BucketId;
    let original: TableRecord[];

    /** Every record a consumer reading the table through the catalog sees. */
    const queried = async (): Promise<string[]> =>
      (
        await queryArchive({
          hotStore: h.inner,
          objectStore: h.objects,
          archivePrefix: PREFIX,
          tableId: TABLE,
          sql: "SELECT hex(sort_key) AS s, hex(value) AS v FROM chat ORDER BY s, v",
          tempDir: temp,
        })
      ).rows.map((row) => row.map((v) => String(jsonValue(v))).join("|"));
    const rowsOf = (records: TableRecord[]) =>
      records
        .map(
          (r) =>
            `${Buffer.from(r.sortKey).toString("hex").toUpperCase()}|${Buffer.from(r.value).toString("hex").toUpperCase()}`,
        )
        .sort();

    beforeEach(async () => {
      temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-catalog-races-tmp-"));
      ({ h, close } = await open());
      const seeded = await seedTable(
        h,
        TABLE,
        "CalendarMonthUtc",
        "parquet",
        chatRecords([3], 60, ["solo"]),
      );
      ({ id, records: original } = [...seeded.values()][0]!);
    });
    afterEach(async () => {
      await close();
      rmSync(temp, { recursive: true, force: true });
    });

    /**
     * Restore the archived bucket, append five corrected records, switch the
     * table to JSON and archive the bucket again: 65 records, a new version.
     */
    const restoreCorrectSwitchAndRearchive = async (): Promise<TableRecord[]> => {
      expect((await restoreBucket(h.process().ctx, id, { holdMs: 0 })).result).toBe("restored");
      const corrections = chatRecords([3], 65, ["solo"]).slice(60);
      await h.inner.append(TABLE, corrections, h.clock.now());
      await h.inner.registerTable(
        { tableId: TABLE, strategy: "CalendarMonthUtc", format: "json", writableBuckets: null },
        h.clock.now(),
      );
      const all = [...original, ...corrections];
      await converge(h, new Map([["solo", { id, records: all }]]));
      expect((await onlyPart(h.inner, id)).key).toMatch(/\.json$/);
      return all;
    };

    for (const stalledAt of ["its first catalog request", "its entry's create"] as const) {
      it(`publish's catalog write stalled at ${stalledAt} past cleanup, a restore with corrections, a format switch and a re-archive brings back nothing old and lists the bucket once`, async () => {
        let current: TableRecord[] = [];
        const { ctx } = h.process();
        const stalled = new StalledCatalogWrite(ctx.objectStore, async () => {
          current = await restoreCorrectSwitchAndRearchive();
        });
        // "first catalog request" stalls the listing; "create" stalls after the metadata was read.
        const publisher = {
          ...ctx,
          objectStore:
            stalledAt === "its entry's create"
              ? stalled
              : new (class extends StalledCatalogWrite {
                  override async list(
                    prefix: string,
                    options?: port.ListOptions,
                  ): Promise<port.ListPage> {
                    if (prefix.includes("/catalog/")) await this.head(prefix);
                    return await super.list(prefix, options);
                  }
                })(ctx.objectStore, async () => {
                  current = await restoreCorrectSwitchAndRearchive();
                }),
        };
        for (const phase of ["claim", "export", "seal"]) {
          expect(await runNextPhase(ctx, id)).toMatchObject({ phase, result: "advanced" });
        }
        // Publish commits, then its catalog write stalls while the world moves on.
        expect(await runNextPhase(publisher, id)).toMatchObject({ phase: "publish" });
        expect(current).toHaveLength(65);

        expect(await queried()).toEqual(rowsOf(current));
        await expectCatalogMatchesPublished(h.inner, h.objects, PREFIX, [TABLE]);
      });
    }

    it("GC that decided 'no entry' while the bucket was restored, its catalog write landing after the re-archive, leaves the new entry in place", async () => {
      await converge(h, new Map([["solo", { id, records: original }]]));
      expect((await restoreBucket(h.process().ctx, id, { holdMs: 0 })).result).toBe("restored");
      // GC reads the bucket as hot (after taking its lease), then stalls past its lease.
      let stalled = false;
      const gcHotStore = new Proxy(h.inner, {
        get(target, property, receiver) {
          if (property === "getBucket") {
            return async (bucket: BucketId) => {
              const metadata = await target.getBucket(bucket);
              if (!stalled && metadata?.ownerToken != null) {
                stalled = true;
                h.clock.advance(h.settings.leaseMs + 1);
                await converge(h, new Map([["solo", { id, records: original }]]));
              }
              return metadata;
            };
          }
          const value: unknown = Reflect.get(target, property, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        },
      }) as HotStore;
      // Make the old archive old enough to be collected: the clock moves past
      // the objects' real creation time (files' mtime, S3's LastModified).
      h.clock.set(new Date(Date.now() + 2 * DAY));
      await setDatabaseClock(h.inner, h.clock.now());
      const report = await collectGarbage(
        {
          hotStore: gcHotStore,
          objectStore: h.objects,
          clock: h.clock,
          archivePrefix: PREFIX,
          log: silentLog,
        },
        { minAgeMs: 0, dryRun: false, leaseMs: h.settings.leaseMs },
      );
      expect(stalled).toBe(true);
      expect(report.stopped_because).toBe("done");

      expect(await queried()).toEqual(rowsOf(original));
      await expectCatalogMatchesPublished(h.inner, h.objects, PREFIX, [TABLE]);
    });
  });
}
