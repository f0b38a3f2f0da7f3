/**
 * Every case of the Parquet writer read through pyarrow, the reader an Arrow
 * pipeline would use (the unit test reads the same cases through our reader,
 * hyparquet and DuckDB): page CRCs verified, every row, the Arrow schema,
 * ZSTD, row-group statistics on event_time and sort_key only, and an offset
 * index (no column index) on every column chunk.
 *
 * Needs Python 3 with pyarrow: $PULPITUM_TEST_PYTHON, else bench/.venv/bin/python
 * when present, else python3 (`pip install pyarrow`). Without it the test
 * fails saying so: it is never skipped.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeParquet } from "../../src/archive/parquet/encode.js";
import { RowStreamGuard } from "../../src/archive/row-guard.js";
import type { BucketRow } from "../../src/ports/hot-store.js";
import { expectedStats, KEY, PARQUET_CASES } from "../unit/archive/parquet-cases.js";

const READ = String.raw`
import json, sys
try:
    import pyarrow as pa, pyarrow.parquet as pq
except ImportError as error:
    print(json.dumps({"missing": str(error)})); sys.exit(0)
f = pq.ParquetFile(sys.argv[1], page_checksum_verification=True)
table = f.read()
meta = f.metadata
groups = []
for g in range(meta.num_row_groups):
    group = meta.row_group(g)
    columns = []
    for c in range(group.num_columns):
        chunk = group.column(c)
        s = chunk.statistics
        minmax = s is not None and s.has_min_max
        raw = lambda v: v.hex() if isinstance(v, bytes) else str(v)
        columns.append({
            "name": chunk.path_in_schema,
            "compression": chunk.compression,
            "min": raw(s.min_raw) if minmax else None,
            "max": raw(s.max_raw) if minmax else None,
            "offset_index": chunk.has_offset_index,
            "column_index": chunk.has_column_index,
        })
    groups.append({"rows": group.num_rows, "columns": columns})
cols = {name: table.column(name).to_pylist() for name in table.column_names}
print(json.dumps({
    "schema": [[f.name, str(f.type), f.nullable] for f in table.schema],
    "partition_keys": sorted({v.hex() for v in cols["partition_key"]}),
    "event_time_ns": [str(v) for v in table.column("event_time").cast(pa.int64()).to_pylist()],
    "sort_key": [v.hex() for v in cols["sort_key"]],
    "value": [v.hex() for v in cols["value"]],
    "groups": groups,
}))
`;

interface PyarrowView {
  readonly missing?: string;
  readonly schema: [string, string, boolean][];
  readonly partition_keys: string[];
  readonly event_time_ns: string[];
  readonly sort_key: string[];
  readonly value: string[];
  readonly groups: {
    rows: number;
    columns: {
      name: string;
      compression: string;
      min: string | null;
      max: string | null;
      offset_index: boolean;
      column_index: boolean;
    }[];
  }[];
}

function python(): string {
  const fromEnv = process.env.PULPITUM_TEST_PYTHON;
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  const venv = fileURLToPath(new URL("../../bench/.venv/bin/python", import.meta.url));
  return existsSync(venv) ? venv : "python3";
}

function readWithPyarrow(file: string): Promise<PyarrowView> {
  return new Promise((resolve, reject) => {
    execFile(
      python(),
      ["-c", READ, file],
      { encoding: "utf8", maxBuffer: 256 << 20 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`pyarrow could not read ${file}: ${stderr || error.message}`));
        else resolve(JSON.parse(stdout) as PyarrowView);
      },
    );
  });
}

async function write(rows: readonly BucketRow[], rowGroupRows?: number): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  async function* pages() {
    for (let i = 0; i < rows.length; i += 1000) yield rows.slice(i, i + 1000);
    if (rows.length === 0) yield [];
  }
  for await (const chunk of encodeParquet(KEY, pages(), new RowStreamGuard(), { rowGroupRows }))
    chunks.push(chunk);
  return Buffer.concat(chunks);
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "parquet-pyarrow-test-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the Parquet writer's files read through pyarrow", () => {
  for (const [name, make, rowGroupRows] of PARQUET_CASES) {
    it(`${name}: pyarrow verifies every page CRC and reads every row, the Arrow schema, chunk statistics and page indexes`, async () => {
      const rows = make();
      const file = path.join(dir, `${name.replace(/\W+/g, "-")}.parquet`);
      await writeFile(file, await write(rows, rowGroupRows));
      const view = await readWithPyarrow(file);
      expect(view.missing, `${python()} needs pyarrow (pip install pyarrow)`).toBeUndefined();

      expect(view.schema).toEqual([
        ["partition_key", "binary", false],
        ["event_time", "timestamp[ns, tz=UTC]", false],
        ["sort_key", "binary", false],
        ["value", "binary", false],
      ]);
      expect(view.partition_keys).toEqual(rows.length === 0 ? [] : [hex(KEY)]);
      expect(view.event_time_ns).toEqual(rows.map((r) => String(r.eventTime * 1000n)));
      expect(view.sort_key).toEqual(rows.map((r) => hex(r.sortKey)));
      expect(view.value).toEqual(rows.map((r) => hex(r.value)));

      const groupRows = rowGroupRows ?? 16_384;
      const want = expectedStats(rows, groupRows);
      expect(view.groups.length).toBe(want.length);
      view.groups.forEach((group, g) => {
        expect(group.rows).toBe(Math.min(groupRows, rows.length - g * groupRows));
        const [partitionKey, eventTime, sortKey, value] = group.columns;
        for (const column of group.columns) {
          expect(column.compression, column.name).toBe("ZSTD");
          expect(column.offset_index, `${column.name} offset index`).toBe(true);
          // Chunk statistics, no per-page column index (as parquet-wasm wrote them too).
          expect(column.column_index, `${column.name} column index`).toBe(false);
        }
        expect([eventTime!.min, eventTime!.max]).toEqual(want[g]!.times.map(String));
        expect([sortKey!.min, sortKey!.max]).toEqual(want[g]!.keys.map((k) => hex(k)));
        expect([partitionKey!.min, value!.min]).toEqual([null, null]);
      });
    });
  }
});
