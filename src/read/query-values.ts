/**
 * How `pulpitum query` shows DuckDB values: the JSON form of `--json` and the
 * text of the readable table.
 *
 * JSON: integers (BIGINT included) as numbers when exactly representable
 * (|n| <= 2^53 - 1), otherwise as decimal strings; BLOB as standard base64
 * (the project's JSON form of bytes); TIMESTAMP and TIMESTAMPTZ as RFC 3339
 * UTC with six fractional digits; lists, arrays and structs as JSON arrays
 * and objects; maps as arrays of `{"key", "value"}`; NaN and infinities, and
 * every other type (DECIMAL, DATE, INTERVAL, UUID, ...), as DuckDB's text.
 */
import {
  DuckDBArrayValue,
  DuckDBBlobValue,
  DuckDBListValue,
  DuckDBMapValue,
  DuckDBStructValue,
  DuckDBTimestampTZValue,
  DuckDBTimestampValue,
  type DuckDBValue,
} from "@duckdb/node-api";
import { showBytes } from "../domain/display.js";
import { formatMicrosRfc3339 } from "../domain/time.js";

export function jsonValue(value: DuckDBValue): unknown {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "bigint") {
    return value >= -BigInt(Number.MAX_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(value)
      : value.toString();
  }
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value);
  if (value instanceof DuckDBBlobValue) return Buffer.from(value.bytes).toString("base64");
  if (value instanceof DuckDBTimestampValue || value instanceof DuckDBTimestampTZValue) {
    return timestampText(value);
  }
  if (value instanceof DuckDBListValue || value instanceof DuckDBArrayValue) {
    return value.items.map(jsonValue);
  }
  if (value instanceof DuckDBStructValue) {
    return Object.fromEntries(Object.entries(value.entries).map(([k, v]) => [k, jsonValue(v)]));
  }
  if (value instanceof DuckDBMapValue) {
    return value.entries.map((e) => ({ key: jsonValue(e.key), value: jsonValue(e.value) }));
  }
  return String(value);
}

/** One cell of the readable table: bytes as text when printable (else `b64:` + base64), times in RFC 3339. */
export function displayValue(value: DuckDBValue): string | null {
  if (value === null) return null;
  if (value instanceof DuckDBBlobValue) return showBytes(value.bytes, 64);
  if (value instanceof DuckDBTimestampValue || value instanceof DuckDBTimestampTZValue) {
    return timestampText(value);
  }
  const json = jsonValue(value);
  return typeof json === "string" ? json : JSON.stringify(json);
}

function timestampText(value: DuckDBTimestampValue | DuckDBTimestampTZValue): string {
  try {
    return formatMicrosRfc3339(value.micros);
  } catch {
    return String(value); // infinity, or outside the years 0000-9999
  }
}
