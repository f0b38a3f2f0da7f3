/**
 * Parquet payloads: the record schema v2 envelope, ZSTD, written by the
 * native writer (native.ts), which needs Zstandard in Node's zlib (Node
 * 22.15+). It is the one writer: issue 31 measured it at 1.46x less CPU per
 * row than parquet-wasm on the same rows (bench/README.md), so parquet-wasm
 * was removed.
 */
import type { RowBatch } from "../../ports/row-page.js";
import type { RowGuard } from "../row-guard.js";
import type { AnnouncedRowGroup } from "./announced-groups.js";
import { writeNativeParquet } from "./native.js";
import { requireZstd } from "./zstd-page.js";

export { DATA_PAGE_BYTES, DATA_PAGE_ROWS, DEFAULT_ROW_GROUP_ROWS } from "./layout.js";

export interface PayloadEncodingOptions {
  /** Rows per Parquet row group (default {@link DEFAULT_ROW_GROUP_ROWS}). */
  readonly rowGroupRows?: number;
  /** Told where each row group lies once its bytes were taken (see writeNativeParquet). */
  readonly onRowGroup?: (group: AnnouncedRowGroup) => Promise<void> | void;
}

/** Encode pages of rows as an envelope Parquet file. */
export function encodeParquet(
  partitionKey: Uint8Array,
  pages: AsyncIterable<RowBatch>,
  guard: RowGuard,
  options: PayloadEncodingOptions,
): AsyncIterable<Uint8Array> {
  requireZstd("the Parquet writer");
  return writeNativeParquet(partitionKey, pages, guard, options);
}
