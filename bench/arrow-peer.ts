/**
 * The Arrow peer (bench/arrow_peer.py) run from `npm run bench`: binary COPY
 * through psycopg 3 into pyarrow, Parquet with ZSTD to a file, the pipeline a
 * data engineer would write instead of an export. Python is a bench tool
 * only: when it, pyarrow or psycopg is missing the peer is skipped with the
 * reason, and the bench goes on.
 *
 * The interpreter: $PULPITUM_BENCH_PYTHON, else bench/.venv/bin/python.
 * Without either, the bench makes bench/.venv itself once (`python3 -m venv
 * bench/.venv && bench/.venv/bin/pip install pyarrow 'psycopg[binary]'`), so
 * a fresh clone measures the peer; when that fails, python3 as it is.
 */
import { execFile } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
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

const VENV = fileURLToPath(new URL("./.venv", import.meta.url));

function run(command: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { encoding: "utf8", maxBuffer: 8 << 20 }, (error, _out, stderr) =>
      error
        ? reject(new Error(`${command} ${args.join(" ")}: ${error.message} ${stderr}`))
        : resolve(),
    );
  });
}

/** The peer's interpreter, making bench/.venv with its two packages when there is none. */
async function pythonPath(log: (message: string) => void): Promise<string> {
  const fromEnv = process.env.PULPITUM_BENCH_PYTHON;
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  const venvPython = path.join(VENV, "bin", "python");
  if (existsSync(venvPython)) return venvPython;
  try {
    log(`making ${VENV} for the Arrow peer (pip install pyarrow psycopg[binary])`);
    await run("python3", ["-m", "venv", VENV]);
    await run(path.join(VENV, "bin", "pip"), ["install", "--quiet", "pyarrow", "psycopg[binary]"]);
    return venvPython;
  } catch (error) {
    log(`could not make ${VENV}: ${String(error)}; trying python3 as it is`);
    rmSync(VENV, { recursive: true, force: true });
    return "python3";
  }
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
  log: (message: string) => void,
): Promise<ArrowPeerOutcome> {
  const python = await pythonPath(log);
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
