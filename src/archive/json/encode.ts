/**
 * JSON payloads: one record per line in the record JSON form.
 */
import { recordToJson } from "../../domain/record.js";
import { asRowPage, rowAt, type RowBatch } from "../../ports/row-page.js";
import type { RowGuard } from "../row-guard.js";

export async function* encodeNdjson(
  partitionKey: Uint8Array,
  pages: AsyncIterable<RowBatch>,
  guard: RowGuard,
): AsyncIterable<Uint8Array> {
  const target = 1 << 20;
  let lines: string[] = [];
  let pending = 0;
  for await (const batch of pages) {
    const page = asRowPage(batch);
    guard.acceptPage(page);
    for (let i = 0; i < page.count; i++) {
      const line = `${JSON.stringify(recordToJson({ partitionKey, ...rowAt(page, i) }))}\n`;
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
