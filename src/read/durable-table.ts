/**
 * One logical table over hot and archived buckets.
 *
 * Per bucket, the route and the hot rows come from one statement, so a read
 * racing publish or cleanup returns either the hot rows or the archive, never
 * a mix and never nothing. Archived routes name immutable manifests, which are
 * cached (bounded, process-local); hot and archiving observations are never
 * cached. An object-store error reaches the caller: there is no fallback to
 * hot rows that may be kept only for cleanup.
 *
 * No row of a payload that differs from its manifest is knowingly returned:
 * a JSON part is copied and its SHA-256 and length checked against the
 * manifest before it is decoded (see archive/verified-object.ts); a Parquet
 * part is read by range, so its footer's row count is checked against the
 * manifest, every page against the CRC-32 in its header before it is
 * decoded, and each row group's decoded bounds against its statistics (see
 * archive/parquet/reader.ts). A mismatch is an ArchiveIntegrityError
 * naming the object. Parquet parts written without page CRCs (before the
 * writer recorded them) are checked only structurally on this path.
 */
import {
  manifestParts,
  validateArchiveManifest,
  type ArchiveManifest,
  type PayloadPart,
} from "../archive/manifest-v5.js";
import { readRecordBatches } from "../archive/payload-reader.js";
import { ParquetPayloadReader } from "../archive/parquet/reader.js";
import { objectByteSource } from "../archive/byte-sources.js";
import { verifiedObjectSource } from "../archive/verified-object.js";
import type { BucketId } from "../domain/bucket.js";
import { showBucket } from "../domain/display.js";
import { bytesEqual, compareClustering, type TableRecord } from "../domain/record.js";
import type { TableId } from "../domain/table.js";
import { microsToDate, type EpochMicros } from "../domain/time.js";
import {
  ArchiveIntegrityError,
  CorruptBucketError,
  InvalidInputError,
  ObjectNotFoundError,
  UnknownTableError,
} from "../errors.js";
import type { Clock } from "../ports/clock.js";
import type {
  AppendResult,
  BucketMetadata,
  ClusteringPosition,
  HotReads,
  RecordAppends,
} from "../ports/hot-store.js";
import type { ObjectStore } from "../ports/object-store.js";

export const DEFAULT_READ_LIMIT = 100;
export const MAX_READ_LIMIT = 10_000;
export const DEFAULT_READ_MAX_BYTES = 8 * 1024 * 1024;

export interface ReadOptions {
  /** Inclusive lower bound on event_time (epoch microseconds). */
  readonly from?: EpochMicros;
  /** Exclusive upper bound. */
  readonly to?: EpochMicros;
  /** Continue after the page that returned this cursor. */
  readonly cursor?: string;
  /** Records per page (1..10000, default 100). */
  readonly limit?: number;
  /** Stop the page once this many key and value bytes were collected (default 8 MiB). */
  readonly maxBytes?: number;
}

export interface ReadPage {
  readonly records: TableRecord[];
  /** Pass as `cursor` for the next page; null when the range is exhausted. */
  readonly nextCursor: string | null;
  /** Archive bytes fetched for this page (observability and benches). */
  readonly archiveBytesFetched: number;
  /**
   * Buckets of the range this page went through that expired (their
   * table's `expire_after` passed): their records are gone for good, on
   * purpose, and the page holds none of them. Not an error.
   */
  readonly expired: readonly ExpiredBucket[];
}

/** A bucket a read found expired. */
export interface ExpiredBucket {
  readonly bucketKey: string;
  readonly start: Date;
  readonly end: Date;
  readonly expiredAt: Date;
}

export interface DurableTableOptions {
  readonly hotStore: HotReads & RecordAppends;
  readonly objectStore: ObjectStore;
  readonly clock: Clock;
  /** Archive key prefix, to validate manifests against the expected location. */
  readonly archivePrefix?: string;
  /** Manifests (and Parquet footers) kept in memory; default 1024. */
  readonly cacheEntries?: number;
  /** Where a JSON part is copied while its hash is checked (default: the OS temporary folder). */
  readonly tempDir?: string;
}

interface ArchivedRoute {
  readonly manifest: ArchiveManifest;
  readonly parts: readonly PayloadPart[];
  /** Open Parquet readers (footers read) by part key. */
  readonly parquet: Map<string, ParquetPayloadReader>;
}

export class DurableTable {
  readonly #hot: HotReads & RecordAppends;
  readonly #objects: ObjectStore;
  readonly #clock: Clock;
  readonly #prefix: string | undefined;
  readonly #cache = new Map<string, ArchivedRoute>();
  readonly #cacheEntries: number;
  readonly #tempDir: string | undefined;

  constructor(options: DurableTableOptions) {
    this.#hot = options.hotStore;
    this.#objects = options.objectStore;
    this.#clock = options.clock;
    this.#prefix = options.archivePrefix;
    this.#cacheEntries = options.cacheEntries ?? 1024;
    this.#tempDir = options.tempDir;
  }

  /** Append records (one transaction; see RecordAppends.append). */
  async append(tableId: TableId, records: readonly TableRecord[]): Promise<AppendResult> {
    return await this.#hot.append(tableId, records, this.#clock.now());
  }

  /**
   * Records of one partition in `(event_time, sort_key)` order across every
   * bucket the range spans, chronologically by bucket bounds, one page at a
   * time.
   */
  async read(
    tableId: TableId,
    partitionKey: Uint8Array,
    options: ReadOptions = {},
  ): Promise<ReadPage> {
    const limit = options.limit ?? DEFAULT_READ_LIMIT;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_READ_LIMIT) {
      throw new InvalidInputError(
        `limit ${limit}`,
        "is out of range",
        `an integer from 1 to ${MAX_READ_LIMIT}`,
      );
    }
    const maxBytes = options.maxBytes ?? DEFAULT_READ_MAX_BYTES;
    const after =
      options.cursor === undefined
        ? undefined
        : decodeCursor(options.cursor, tableId, partitionKey);
    if ((await this.#hot.getTable(tableId)) === null) throw new UnknownTableError(tableId);

    const lower = maxMicros(options.from, after?.eventTime);
    const buckets = await this.#hot.listPartitionBuckets(tableId, partitionKey, {
      from: lower === undefined ? undefined : microsToDate(lower),
      to: options.to === undefined ? undefined : microsToDate(options.to + 999n),
    });

    const records: TableRecord[] = [];
    const expired: ExpiredBucket[] = [];
    let bytes = 0;
    let fetched = 0;
    let full = false;
    for (const bucket of buckets) {
      const want = limit - records.length;
      const chunk = await this.#readBucket(bucket, {
        from: options.from,
        to: options.to,
        after,
        limit: want,
      });
      fetched += chunk.fetched;
      if (chunk.expiredAt !== undefined) {
        expired.push({
          bucketKey: bucket.id.bucketKey,
          start: bucket.start,
          end: bucket.end,
          expiredAt: chunk.expiredAt,
        });
      }
      for (const record of chunk.records) {
        records.push(record);
        bytes +=
          record.sortKey.byteLength + record.value.byteLength + record.partitionKey.byteLength;
        if (records.length >= limit || bytes >= maxBytes) {
          full = true;
          break;
        }
      }
      if (full) break;
    }
    const last = records[records.length - 1];
    return {
      records,
      nextCursor: full && last ? encodeCursor(tableId, partitionKey, last) : null,
      archiveBytesFetched: fetched,
      expired,
    };
  }

  async #readBucket(
    bucket: BucketMetadata,
    range: { from?: EpochMicros; to?: EpochMicros; after?: ClusteringPosition; limit: number },
  ): Promise<{ records: TableRecord[]; fetched: number; expiredAt?: Date }> {
    const read = await this.#hot.readBucket(bucket.id, range);
    if (read.route === "missing") return { records: [], fetched: 0 };
    if (read.route === "expired") return { records: [], fetched: 0, expiredAt: read.expiredAt };
    if (read.route === "hot") {
      return {
        records: read.rows.map((row) => ({ partitionKey: bucket.id.partitionKey, ...row })),
        fetched: 0,
      };
    }
    if (bucket.corruption !== null) {
      throw new CorruptBucketError(
        showBucket(bucket.id),
        read.manifestKey,
        bucket.corruption.at,
        bucket.corruption.problem,
      );
    }
    try {
      return await this.#readArchived(bucket.id, read.manifestKey, range);
    } catch (error) {
      // The route was taken before the bucket expired and garbage collection
      // deleted its objects since: the bucket is reported expired, never read
      // in part. Any other failure, or a missing object of a bucket that did
      // not expire, is the archive's damage and reaches the caller.
      if (!(error instanceof ArchiveIntegrityError)) throw error;
      const now = await this.#hot.readBucket(bucket.id, { limit: 1 });
      if (now.route !== "expired") throw error;
      return { records: [], fetched: 0, expiredAt: now.expiredAt };
    }
  }

  async #readArchived(
    id: BucketId,
    manifestKey: string,
    range: { from?: EpochMicros; to?: EpochMicros; after?: ClusteringPosition; limit: number },
  ): Promise<{ records: TableRecord[]; fetched: number }> {
    let fetched = 0;
    let route = this.#cache.get(manifestKey);
    if (route === undefined) {
      const bytes = await this.#objects.get(manifestKey).catch((error: unknown) => {
        if (error instanceof ObjectNotFoundError)
          throw new ArchiveIntegrityError(
            manifestKey,
            `manifest is missing (named by bucket ${showBucket(id)}'s metadata)`,
            { cause: error },
          );
        throw error;
      });
      fetched += bytes.byteLength;
      const manifest = validateArchiveManifest(
        bytes,
        { prefix: this.#prefix, bucket: id, manifestKey },
        manifestKey,
      );
      route = { manifest, parts: manifestParts(manifest), parquet: new Map() };
      this.#remember(manifestKey, route);
    }
    const { manifest } = route;
    const lower = maxMicros(range.from, range.after?.eventTime);
    const keep = (r: TableRecord) =>
      (range.from === undefined || r.eventTime >= range.from) &&
      (range.to === undefined || r.eventTime < range.to) &&
      (range.after === undefined || compareClustering(r, range.after) > 0);
    // A part is read only if its key range can hold a record the page wants.
    const before = (part: PayloadPart) =>
      part.last !== null &&
      ((range.after !== undefined && compareClustering(part.last, range.after) <= 0) ||
        (range.from !== undefined && part.last.eventTime < range.from));
    const beyond = (part: PayloadPart) =>
      part.first !== null && range.to !== undefined && part.first.eventTime >= range.to;
    const out: TableRecord[] = [];

    for (const part of route.parts) {
      if (out.length >= range.limit || beyond(part)) break;
      if (before(part)) continue;
      const want = range.limit - out.length;
      if (manifest.format === "parquet") {
        let reader = route.parquet.get(part.key);
        if (reader === undefined) {
          const source = await objectByteSource(this.#objects, part.key, part.byteLength);
          reader = await ParquetPayloadReader.open(source).catch((error: unknown) => {
            if (error instanceof ObjectNotFoundError && error.objectKey === part.key)
              throw new ArchiveIntegrityError(
                part.key,
                `payload is missing (${part.byteLength} bytes in manifest ${manifestKey})`,
                { cause: error },
              );
            throw error;
          });
          if (reader.rowCount !== part.rowCount) {
            throw new ArchiveIntegrityError(
              part.key,
              `the footer states ${reader.rowCount} rows, ${part.rowCount} in manifest ${manifestKey}`,
            );
          }
          route.parquet.set(part.key, reader);
        }
        const start = readerBytes(reader);
        for await (const batch of reader.readRange(lower, range.to, want)) {
          for (const r of batch) {
            if (keep(r)) out.push(r);
            if (out.length >= range.limit) break;
          }
          if (out.length >= range.limit) break;
        }
        fetched += readerBytes(reader) - start;
        continue;
      }
      const source = await verifiedObjectSource(this.#objects, part, `in manifest ${manifestKey}`, {
        tempDir: this.#tempDir,
      });
      try {
        for await (const batch of readRecordBatches(source, manifest.format)) {
          for (const r of batch) {
            if (keep(r)) out.push(r);
            if (out.length >= range.limit) break;
          }
          if (out.length >= range.limit) break;
        }
      } finally {
        await source.close();
      }
      fetched += source.bytesFetched;
    }
    return { records: out, fetched };
  }

  #remember(key: string, route: ArchivedRoute): void {
    if (this.#cache.size >= this.#cacheEntries) {
      const oldest = this.#cache.keys().next().value;
      if (oldest !== undefined) this.#cache.delete(oldest);
    }
    this.#cache.set(key, route);
  }
}

function readerBytes(reader: ParquetPayloadReader): number {
  return (reader as unknown as { source: { bytesFetched: number } }).source.bytesFetched;
}

function maxMicros(
  a: EpochMicros | undefined,
  b: EpochMicros | undefined,
): EpochMicros | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a > b ? a : b;
}

const CURSOR_RULE =
  "a next_cursor value returned by the previous page of the same table and partition";

/** Opaque cursor: the last returned `(event_time, sort_key)`, bound to its table and partition. */
export function encodeCursor(
  tableId: TableId,
  partitionKey: Uint8Array,
  last: ClusteringPosition,
): string {
  return Buffer.from(
    JSON.stringify({
      v: 1,
      t: tableId,
      p: Buffer.from(partitionKey).toString("base64"),
      e: last.eventTime.toString(),
      k: Buffer.from(last.sortKey).toString("base64"),
    }),
  ).toString("base64url");
}

export function decodeCursor(
  cursor: string,
  tableId: TableId,
  partitionKey: Uint8Array,
): ClusteringPosition {
  let parsed: { v?: unknown; t?: unknown; p?: unknown; e?: unknown; k?: unknown };
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new InvalidInputError(
      `cursor ${JSON.stringify(cursor.slice(0, 40))}`,
      "is not a Pulpitum cursor",
      CURSOR_RULE,
    );
  }
  if (
    parsed?.v !== 1 ||
    typeof parsed.e !== "string" ||
    !/^-?\d+$/.test(parsed.e) ||
    typeof parsed.k !== "string" ||
    typeof parsed.p !== "string"
  ) {
    throw new InvalidInputError(
      `cursor ${JSON.stringify(cursor.slice(0, 40))}`,
      "is not a Pulpitum cursor",
      CURSOR_RULE,
    );
  }
  if (parsed.t !== tableId || !bytesEqual(Buffer.from(parsed.p, "base64"), partitionKey)) {
    throw new InvalidInputError("cursor", "belongs to another table or partition", CURSOR_RULE);
  }
  return { eventTime: BigInt(parsed.e), sortKey: new Uint8Array(Buffer.from(parsed.k, "base64")) };
}
