/**
 * Export one partition (or a time range of it, such as one bucket) from
 * whichever tier holds each bucket, as NDJSON in the record JSON form or as
 * Parquet in the archive's record schema v2 envelope.
 *
 * Records come from {@link DurableTable.read} page by page, so each bucket is
 * read from one tier (never a mix) and memory stays bounded by one page plus
 * the Parquet writer's row group.
 */
import { encodePayload } from "../archive/payload-writer.js";
import type { TableId } from "../domain/table.js";
import type { EpochMicros } from "../domain/time.js";
import type { BucketRow } from "../ports/hot-store.js";
import { MAX_READ_LIMIT, type DurableTable } from "./durable-table.js";

export type ExportFormat = "ndjson" | "parquet";

export interface ExportRequest {
  readonly tableId: TableId;
  readonly partitionKey: Uint8Array;
  /** Inclusive lower bound on event_time. */
  readonly from?: EpochMicros;
  /** Exclusive upper bound. */
  readonly to?: EpochMicros;
  readonly format: ExportFormat;
}

export interface ExportCounts {
  records: number;
  bytes: number;
}

/**
 * The export's bytes, in order. `counts` is updated as they are produced and
 * is final once the iterable is exhausted.
 */
export function exportRecords(
  table: DurableTable,
  request: ExportRequest,
  counts: ExportCounts,
): AsyncIterable<Uint8Array> {
  const pages = readPages(table, request, counts);
  const encoded = encodePayload(
    request.format === "parquet" ? "parquet" : "json",
    request.partitionKey,
    pages,
  );
  return countBytes(encoded, counts);
}

async function* readPages(
  table: DurableTable,
  request: ExportRequest,
  counts: ExportCounts,
): AsyncIterable<readonly BucketRow[]> {
  let cursor: string | undefined;
  do {
    const page = await table.read(request.tableId, request.partitionKey, {
      from: request.from,
      to: request.to,
      cursor,
      limit: MAX_READ_LIMIT,
    });
    counts.records += page.records.length;
    if (page.records.length > 0)
      yield page.records.map((r) => ({
        eventTime: r.eventTime,
        sortKey: r.sortKey,
        value: r.value,
      }));
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
}

async function* countBytes(
  chunks: AsyncIterable<Uint8Array>,
  counts: ExportCounts,
): AsyncIterable<Uint8Array> {
  for await (const chunk of chunks) {
    counts.bytes += chunk.byteLength;
    yield chunk;
  }
}
