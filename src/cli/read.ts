import type { TableRecord } from "../domain/record.js";
import { recordToJson } from "../domain/record.js";
import { formatMicrosRfc3339 } from "../domain/time.js";
import type { ReadPage } from "../read/durable-table.js";
import { showBytes } from "./display.js";
import { renderTable } from "./format.js";

export type DisplayPreset = "raw" | "chat";

/** The chat mapping: an 8-byte big-endian message id shown as a number. */
function showMessageId(sortKey: Uint8Array): string {
  if (sortKey.byteLength === 8)
    return new DataView(sortKey.buffer, sortKey.byteOffset, 8).getBigUint64(0).toString();
  return showBytes(sortKey);
}

export function renderRecords(records: readonly TableRecord[], preset: DisplayPreset): string {
  if (preset === "chat") {
    return renderTable(
      ["channel_id", "timestamp", "id", "message"],
      records.map((r) => [
        showBytes(r.partitionKey, 24),
        formatMicrosRfc3339(r.eventTime),
        showMessageId(r.sortKey),
        showBytes(r.value),
      ]),
    );
  }
  return renderTable(
    ["partition_key", "event_time", "sort_key", "value"],
    records.map((r) => [
      showBytes(r.partitionKey, 24),
      formatMicrosRfc3339(r.eventTime),
      showBytes(r.sortKey, 24),
      showBytes(r.value),
    ]),
  );
}

/**
 * `read --json`: `{"records": [...], "next_cursor": string | null,
 * "expired": [{"bucket_key", "bucket_start", "bucket_end", "expired_at"}]}`.
 */
export function readPageToJson(page: ReadPage) {
  return {
    records: page.records.map(recordToJson),
    next_cursor: page.nextCursor,
    expired: page.expired.map((b) => ({
      bucket_key: b.bucketKey,
      bucket_start: b.start.toISOString(),
      bucket_end: b.end.toISOString(),
      expired_at: b.expiredAt.toISOString(),
    })),
  };
}

/** The lines `read` prints for expired buckets of the range: their records are gone on purpose. */
export function expiredLines(page: ReadPage): string[] {
  return page.expired.map(
    (b) =>
      `expired: bucket ${b.bucketKey} [${b.start.toISOString()}, ${b.end.toISOString()}) ` +
      `expired at ${b.expiredAt.toISOString()}; its records are gone (its table's expire_after)`,
  );
}
