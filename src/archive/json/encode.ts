/**
 * JSON payloads: one record per line in the record JSON form.
 */
import { recordToJson } from "../../domain/record.js";
import type { BucketRow } from "../../ports/hot-store.js";
import type { RowGuard } from "../row-guard.js";

export async function* encodeNdjson(
  partitionKey: Uint8Array,
  pages: AsyncIterable<readonly BucketRow[]>,
  guard: RowGuard,
): AsyncIterable<Uint8Array> {
  const target = 1 << 20;
  let lines: string[] = [];
  let pending = 0;
  for await (const page of pages) {
    for (const row of page) {
      guard.accept(row);
      const line = `${JSON.stringify(recordToJson({ partitionKey, ...row }))}\n`;
      lines.push(line);
      pending += line.length;
      if (pending >= target) {
        yield Buffer.from(lines.join(""), "utf8");
        lines = [];
        pending = 0;
      }
    }
  }
  if (lines.length > 0) yield Buffer.from(lines.join(""), "utf8");
}
