/**
 * The erasure invocation (functions/erase.ts, events/erase-partition.json):
 * `{"v":1,"table_id":…,"partition_key_b64":…,"from"?:RFC 3339,"to"?:RFC 3339,
 * "dry_run"?:boolean,"yes"?:true}`, the same request as `pulpitum erase`.
 * Unknown fields are refused; without `"yes": true` only a dry run is taken.
 */
import { parseBase64 } from "../domain/record.js";
import { parseTableId, type TableId } from "../domain/table.js";
import { microsToDate, parseRfc3339Micros } from "../domain/time.js";
import { InvalidInputError } from "../errors.js";
import type { ErasureRange } from "../ports/erasure-store.js";

export const ERASURE_REQUEST_FORM =
  '{"v":1,"table_id":string,"partition_key_b64":base64,"from"?:RFC 3339,"to"?:RFC 3339,"dry_run"?:boolean,"yes"?:true}';

const KNOWN = new Set(["v", "table_id", "partition_key_b64", "from", "to", "dry_run", "yes"]);

export interface ErasureInvocation {
  readonly tableId: TableId;
  readonly partitionKey: Uint8Array;
  readonly range: ErasureRange;
  readonly dryRun: boolean;
}

export function parseErasureRequest(value: unknown, input = "erase event"): ErasureInvocation {
  const refuse = (problem: string) => new InvalidInputError(input, problem, ERASURE_REQUEST_FORM);
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw refuse("is not a JSON object");
  const event = value as Record<string, unknown>;
  const unknown = Object.keys(event).filter((k) => !KNOWN.has(k));
  if (unknown.length > 0) throw refuse(`has unknown fields ${unknown.join(", ")}`);
  if (event.v !== 1) throw refuse(`has "v" ${JSON.stringify(event.v)}, not 1`);
  if (typeof event.table_id !== "string") throw refuse('lacks "table_id"');
  const tableId = parseTableId(event.table_id, `${input} table_id`);
  const partitionKey = parseBase64(event.partition_key_b64, `${input} partition_key_b64`);
  const time = (field: "from" | "to"): Date | null => {
    const text = event[field];
    if (text === undefined || text === null) return null;
    if (typeof text !== "string") throw refuse(`has a "${field}" that is not an RFC 3339 string`);
    return microsToDate(parseRfc3339Micros(text, `${input} ${field}`));
  };
  const range = { from: time("from"), to: time("to") };
  if (range.from !== null && range.to !== null && range.from >= range.to)
    throw refuse('has "from" not earlier than "to" (the range is [from, to))');
  if (event.dry_run !== undefined && typeof event.dry_run !== "boolean")
    throw refuse('has a "dry_run" that is not a boolean');
  const dryRun = event.dry_run === true;
  if (!dryRun && event.yes !== true)
    throw refuse(
      'erases for good: add "yes": true to confirm, or "dry_run": true to see what it would erase',
    );
  return { tableId, partitionKey, range, dryRun };
}
