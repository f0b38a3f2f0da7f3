/**
 * The Arrow peer (bench/arrow_peer.py) run from `npm run bench`: binary COPY
 * through psycopg 3 into pyarrow, Parquet with ZSTD to a file, the pipeline a
 * data engineer would write instead of an export. Python is a bench tool
 * only: when it, pyarrow or psycopg is missing the peer is skipped with the
 * reason, and the bench goes on.
 *
 * The interpreter: $PULPITUM_BENCH_PYTHON, else bench/.venv/bin/python when
 * present (`python3 -m venv bench/.venv && bench/.venv/bin/pip install
 * pyarrow 'psycopg[binary]'`), else python3.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import type { BucketId } from "../src/domain/bucket.js";

export interface ArrowPeerResult {
  readonly rows: number;
  readonly bytes: number;
  readonly seconds: number;
  readonly cpuSeconds: number;
  readonly maxRssMb: number;
  readonly pyarrow: string;
  readonly psycopg: string;
}

export type ArrowPeerOutcome =
  | { readonly kind: "measured"; readonly result: ArrowPeerResult }
  | { readonly kind: "skipped"; readonly reason: string };

const SCRIPT = fileURLToPath(new URL("./arrow_peer.py", import.meta.url));

function pythonPath(): string {
  const fromEnv = process.env.PULPITUM_BENCH_PYTHON;
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  const venv = fileURLToPath(new URL("./.venv/bin/python", import.meta.url));
  return existsSync(venv) ? venv : "python3";
}

function runPython(python: string, arg: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    execFile(
      python,
      [SCRIPT, arg],
      { encoding: "utf8", maxBuffer: 1 << 20 },
      (error, stdout, stderr) => {
        if (error) {
          reject(new Error(`${python} ${path.basename(SCRIPT)}: ${error.message} ${stderr}`));
          return;
        }
        resolve(JSON.parse(stdout.trim().split("\n").pop() ?? "{}") as Record<string, unknown>);
      },
    );
  });
}

/** Run the peer on bucket `id`, or say why it cannot run here. */
export async function arrowPeer(
  databaseUrl: string,
  id: BucketId,
  work: string,
): Promise<ArrowPeerOutcome> {
  const python = pythonPath();
  let check: Record<string, unknown>;
  try {
    check = await runPython(python, "--check");
  } catch (error) {
    return { kind: "skipped", reason: `no usable Python (${python}): ${String(error)}` };
  }
  if (typeof check.missing === "string")
    return {
      kind: "skipped",
      reason: `${python} lacks a module (${check.missing}); install pyarrow and psycopg[binary]`,
    };
  const result = (await runPython(
    python,
    JSON.stringify({
      databaseUrl,
      recordsTable: RECORDS_TABLE,
      tableId: id.tableId,
      partitionKeyHex: Buffer.from(id.partitionKey).toString("hex"),
      bucketKey: id.bucketKey,
      outPath: path.join(work, "arrow-peer.parquet"),
    }),
  )) as unknown as ArrowPeerResult;
  return { kind: "measured", result };
}
