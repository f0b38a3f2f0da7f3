import type { TableRecord } from "../domain/record.js";
import { recordToJson } from "../domain/record.js";
import { formatMicrosRfc3339 } from "../domain/time.js";
import type { ReadPage } from "../read/durable-table.js";
import { showBytes, showPartitionKey } from "./display.js";
import { renderTable } from "./format.js";

export type DisplayPreset = "raw" | "chat";

/** The chat mapping: an 8-byte big-endian message id shown as a number. */
function showMessageId(sortKey: Uint8Array): string {
  if (sortKey.byteLength === 8)
    return new DataView(sortKey.buffer, sortKey.byteOffset, 8).getBigUint64(0).toString();
  return showBytes(sortKey);
}

/**
 * A value longer than this many characters is cut in the human table (a
 * 2 MB value would fill the terminal); `--json` and `export` give it whole.
 */
export const SHOWN_VALUE_CHARS = 200;

/** The human table of records, and whether a value was cut to {@link SHOWN_VALUE_CHARS}. */
export function renderRecords(
  records: readonly TableRecord[],
  preset: DisplayPreset,
): { text: string; valuesCut: boolean } {
  let valuesCut = false;
  const value = (bytes: Uint8Array) => {
    const whole = showBytes(bytes);
    if (whole.length <= SHOWN_VALUE_CHARS) return whole;
    valuesCut = true;
    return `${whole.slice(0, SHOWN_VALUE_CHARS)}… (${bytes.byteLength} bytes)`;
  };
  const text =
    preset === "chat"
      ? renderTable(
          ["channel_id", "timestamp", "id", "message"],
          records.map((r) => [
            showPartitionKey(r.partitionKey, 24),
            formatMicrosRfc3339(r.eventTime),
            showMessageId(r.sortKey),
            value(r.value),
          ]),
        )
      : renderTable(
          ["partition_key", "event_time", "sort_key", "value"],
          records.map((r) => [
            showPartitionKey(r.partitionKey, 24),
            formatMicrosRfc3339(r.eventTime),
            showBytes(r.sortKey, 24),
            value(r.value),
          ]),
        );
  return { text, valuesCut };
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
