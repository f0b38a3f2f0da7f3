/**
 * GC and Object Lock: an orphan that a retention still protects is kept and
 * counted (`kept.locked`), not deleted, not hidden behind a delete marker and
 * not an error; the rest of the pass goes on. The file store cannot lock, so
 * the lock is injected with S3's semantics: a plain delete of a retained
 * version only adds a delete marker (the key vanishes from listings, the
 * bytes stay), and the delete is refused when the caller asks to delete only
 * what no retention holds, or when a legal hold refuses it outright.
 */
import { mkdtempSync, rmSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { ForwardingObjectStore } from "../../../src/adapters/object-store/forwarding.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { payloadKey } from "../../../src/domain/object-keys.js";
import { parseTableId } from "../../../src/domain/table.js";
import { ObjectLockedError } from "../../../src/errors.js";
import type { DeleteOptions } from "../../../src/ports/object-store.js";
import { silentLog } from "../../../src/usecases/context.js";
import { collectGarbage } from "../../../src/usecases/gc.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  converge,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const DAY = 86_400_000;

/** The file store with S3's Object Lock behaviour on the listed keys. */
class LockingStore extends ForwardingObjectStore {
  /** Retained until the date: refused only when the caller asks for unretained deletes. */
  readonly retained = new Map<string, Date>();
  /** Under a legal hold: every delete refused (S3's AccessDenied). */
  readonly held = new Set<string>();
  /** Keys hidden behind a delete marker: gone from view, their bytes kept. */
  readonly markers: string[] = [];

  constructor(private readonly files: FileObjectStore) {
    super(files);
  }

  override async delete(key: string, options?: DeleteOptions): Promise<void> {
    if (this.held.has(key)) throw new ObjectLockedError(key, null);
    const until = this.retained.get(key);
    if (until !== undefined) {
      if (options?.unlessRetained === true) throw new ObjectLockedError(key, until);
      this.markers.push(key);
    }
    await this.files.delete(key);
  }
}

describe("garbage collection under Object Lock", () => {
  let dir: string;
  let store: LockingStore;
  let h: Harness<FileObjectStore>;
  let id: BucketId;

  const stray = async (fill: string, ageMs: number) => {
    const key = payloadKey(
      { prefix: h.settings.archivePrefix, ...id },
      fill.repeat(64).slice(0, 64),
      "parquet",
    );
    await h.objects.createIfAbsent(key, new TextEncoder().encode(`stray ${fill}`));
    const when = new Date(h.clock.now().getTime() - ageMs);
    utimesSync(path.join(dir, key), when, when);
    return key;
  };
  const exists = async (key: string) => (await h.objects.head(key)) !== null;

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-gc-lock-"));
    const files = new FileObjectStore(dir);
    store = new LockingStore(files);
    h = harnessOn(await freshPgliteHotStore(), files);
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([3], 40, ["solo"]),
    );
    id = [...expected.values()][0]!.id;
    await converge(h, expected);
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps and counts orphans a retention or legal hold protects, deletes the others, and reports no error", async () => {
    const free = await stray("a", 3 * DAY);
    const retained = await stray("b", 3 * DAY);
    const held = await stray("c", 3 * DAY);
    store.retained.set(retained, new Date(h.clock.now().getTime() + 300 * DAY));
    store.held.add(held);

    const report = await collectGarbage(
      {
        hotStore: h.inner,
        objectStore: store,
        clock: h.clock,
        archivePrefix: h.settings.archivePrefix,
        log: silentLog,
      },
      { minAgeMs: DAY, dryRun: false, leaseMs: h.settings.leaseMs },
    );

    expect(report).toMatchObject({
      deleted_objects: 1,
      stopped_because: "done",
      kept: { locked: 2, referenced: 2 },
    });
    expect(
      report.orphans.map((o) => [o.key, o.action]).sort(([a], [b]) => a!.localeCompare(b!)),
    ).toEqual(
      [
        [free, "deleted"],
        [retained, "kept-locked"],
        [held, "kept-locked"],
      ].sort(([a], [b]) => a!.localeCompare(b!)),
    );
    expect(await exists(free)).toBe(false);
    expect(await exists(retained)).toBe(true);
    expect(await exists(held)).toBe(true);
    // Never hidden behind a delete marker while its bytes stay billed.
    expect(store.markers).toEqual([]);

    // Once the retention ends, the next pass deletes it.
    store.retained.delete(retained);
    const next = await collectGarbage(
      {
        hotStore: h.inner,
        objectStore: store,
        clock: h.clock,
        archivePrefix: h.settings.archivePrefix,
        log: silentLog,
      },
      { minAgeMs: DAY, dryRun: false, leaseMs: h.settings.leaseMs },
    );
    expect(next).toMatchObject({ deleted_objects: 1, kept: { locked: 1 } });
    expect(await exists(retained)).toBe(false);
  });
});
