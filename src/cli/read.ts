import type { TableRecord } from "../domain/record.js";
import { recordToJson } from "../domain/record.js";
import { formatMicrosRfc3339 } from "../domain/time.js";
import type { ReadPage } from "../read/durable-table.js";
import { renderTable } from "./format.js";

export type DisplayPreset = "raw" | "chat";

const decoder = new TextDecoder("utf-8", { fatal: true });

/** Bytes as UTF-8 text when they are printable text, else `b64:` base64. */
function showBytes(bytes: Uint8Array, max = 60): string {
  try {
    const text = decoder.decode(bytes);
    // eslint-disable-next-line no-control-regex
    if (!/[\u0000-\u001f\u007f]/.test(text))
      return text.length > max ? `${text.slice(0, max)}…` : text;
  } catch {
    // not UTF-8
  }
  const b64 = Buffer.from(bytes).toString("base64");
  return `b64:${b64.length > max ? `${b64.slice(0, max)}…` : b64}`;
}

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

/** `read --json`: `{"records": [...], "next_cursor": string | null}`. */
export function readPageToJson(page: ReadPage) {
  return { records: page.records.map(recordToJson), next_cursor: page.nextCursor };
}
