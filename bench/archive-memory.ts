/**
 * Peak memory and throughput of the store step (encode + hash + upload +
 * read back + verify) as the bucket grows. Each (format, rows) pair runs in
 * its own child process so that peak RSS (getrusage maxRSS, plus an RSS
 * sample every 50 ms) belongs to that run alone. The payload goes to a
 * file-backed object store in a temp folder, so the store itself holds
 * nothing in memory.
 *
 *   npx tsx bench/archive-memory.ts                   # 1M and 5M rows, parquet and json
 *   npx tsx bench/archive-memory.ts --rows 200000     # one size
 *   npx tsx bench/archive-memory.ts --rows 1000000,5000000 --format parquet
 *
 * Goal: peak RSS for 5M rows within 10% of 1M rows (memory bounded by a row
 * group, not by the bucket).
 */
import { execFileSync } from "node:child_process";
import { createReadStream } from "node:fs";
import {
  copyFile,
  constants,
  mkdir,
  mkdtemp,
  open,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { storePayload } from "../src/archive/store.js";
import { parseTableId } from "../src/domain/table.js";
import { parseRfc3339Micros } from "../src/domain/time.js";
import { ObjectNotFoundError } from "../src/errors.js";
import type { BucketRow } from "../src/ports/hot-store.js";
import type {
  ByteRange,
  CreateResult,
  ListPage,
  ObjectBody,
  ObjectInfo,
  ObjectStore,
} from "../src/ports/object-store.js";

const VALUE_BYTES = 200;
const PAGE_ROWS = 1000;

function argument(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** A minimal file-backed store for the bench: exclusive create, range reads, streams. */
class BenchFileStore implements ObjectStore {
  constructor(private readonly root: string) {}
  #path(key: string) {
    return path.join(this.root, ...key.split("/"));
  }
  async replace(key: string, body: Uint8Array): Promise<void> {
    const target = this.#path(key);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(`${target}.tmp`, body);
    await rename(`${target}.tmp`, target);
  }
  async createIfAbsent(key: string, body: ObjectBody): Promise<CreateResult> {
    const target = this.#path(key);
    await mkdir(path.dirname(target), { recursive: true });
    try {
      if (body instanceof Uint8Array) await writeFile(target, body, { flag: "wx" });
      else await copyFile(body.filePath, target, constants.COPYFILE_EXCL);
      return "created";
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") return "already-exists";
      throw error;
    }
  }
  async get(key: string, range?: ByteRange): Promise<Uint8Array> {
    const handle = await open(this.#path(key), "r").catch((error: unknown) => {
      throw new ObjectNotFoundError(key, { cause: error });
    });
    try {
      const size = (await handle.stat()).size;
      const start = range?.start ?? 0;
      const end = Math.min(range?.end ?? size, size);
      const buffer = Buffer.allocUnsafe(Math.max(0, end - start));
      await handle.read(buffer, 0, buffer.length, start);
      return buffer;
    } finally {
      await handle.close();
    }
  }
  async getStream(key: string): Promise<AsyncIterable<Uint8Array>> {
    await stat(this.#path(key)).catch((error: unknown) => {
      throw new ObjectNotFoundError(key, { cause: error });
    });
    return createReadStream(this.#path(key), { highWaterMark: 1 << 20 });
  }
  async head(key: string): Promise<ObjectInfo | null> {
    const info = await stat(this.#path(key)).catch(() => null);
    return info === null ? null : { key, size: info.size, lastModified: info.mtime };
  }
  async list(): Promise<ListPage> {
    return { objects: [], continuationToken: undefined };
  }
  async delete(key: string): Promise<void> {
    await rm(this.#path(key), { force: true });
  }
  async uri(key: string): Promise<string> {
    return pathToFileURL(this.#path(key)).href;
  }
}

/** Synthetic snapshot pages: ~200-byte values cut from a random pool, so they barely compress. */
async function* syntheticPages(rows: number): AsyncIterable<BucketRow[]> {
  const pool = new Uint8Array(4 << 20);
  let x = 0x2545f491;
  for (let i = 0; i < pool.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    pool[i] = x & 0xff;
  }
  const start = parseRfc3339Micros("2024-01-01T00:00:00Z");
  for (let first = 0; first < rows; first += PAGE_ROWS) {
    const page: BucketRow[] = [];
    for (let i = first; i < Math.min(rows, first + PAGE_ROWS); i++) {
      const sortKey = Buffer.allocUnsafe(8);
      sortKey.writeBigUInt64BE(BigInt(i));
      const offset = (i * 7919) % (pool.length - VALUE_BYTES);
      page.push({
        eventTime: start + BigInt(i) * 1000n,
        sortKey,
        value: pool.slice(offset, offset + VALUE_BYTES),
      });
    }
    yield page;
    // A real snapshot awaits the database between pages.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

interface ChildResult {
  format: string;
  rows: number;
  seconds: number;
  bytes: number;
  maxRssMiB: number;
  sampledPeakRssMiB: number;
}

async function child(rows: number, format: "parquet" | "json"): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "pulpitum-bench-"));
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 50);
  try {
    const store = new BenchFileStore(path.join(dir, "store"));
    const started = performance.now();
    const payload = await storePayload({
      attempt: { generation: 1, ownerToken: "bench-attempt" },
      store,
      prefix: "bench",
      bucket: {
        tableId: parseTableId("bench"),
        partitionKey: Buffer.from("partition-1"),
        bucketKey: "year:2024",
      },
      format,
      rows: syntheticPages(rows),
      tempDir: dir,
    });
    const seconds = (performance.now() - started) / 1000;
    if (payload.rowCount !== rows)
      throw new Error(`stored ${payload.rowCount} rows, expected ${rows}`);
    const result: ChildResult = {
      format,
      rows,
      seconds,
      bytes: payload.byteLength,
      maxRssMiB: process.resourceUsage().maxRSS / 1024,
      sampledPeakRssMiB: peak / 2 ** 20,
    };
    console.log(JSON.stringify(result));
  } finally {
    clearInterval(sampler);
    await rm(dir, { recursive: true, force: true });
  }
}

function parent(): void {
  const sizes = (argument("--rows") ?? "1000000,5000000").split(",").map(Number);
  const formats = (argument("--format") ?? "parquet,json").split(",");
  const script = fileURLToPath(import.meta.url);
  console.log(
    `store step (encode + hash + upload + read back + verify), ${VALUE_BYTES}-byte values, Node ${process.version}`,
  );
  console.log(
    "format   rows        seconds  rows/s     payload MiB  peak RSS MiB (maxRSS / sampled)",
  );
  const results: ChildResult[] = [];
  for (const format of formats) {
    for (const rows of sizes) {
      const out = execFileSync(
        process.execPath,
        ["--import", "tsx", script, "--child", "--rows", String(rows), "--format", format],
        {
          encoding: "utf8",
          stdio: ["ignore", "pipe", "inherit"],
          maxBuffer: 1 << 20,
        },
      );
      const r = JSON.parse(out.trim().split("\n").pop()!) as ChildResult;
      results.push(r);
      console.log(
        `${r.format.padEnd(8)} ${String(r.rows).padEnd(11)} ${r.seconds.toFixed(1).padStart(7)}  ${Math.round(
          r.rows / r.seconds,
        )
          .toString()
          .padEnd(
            10,
          )} ${(r.bytes / 2 ** 20).toFixed(0).padStart(11)}  ${r.maxRssMiB.toFixed(0)} / ${r.sampledPeakRssMiB.toFixed(0)}`,
      );
    }
  }
  for (const format of formats) {
    const runs = results.filter((r) => r.format === format).sort((a, b) => a.rows - b.rows);
    if (runs.length >= 2) {
      const small = runs[0]!;
      const large = runs[runs.length - 1]!;
      const growth = (large.maxRssMiB / small.maxRssMiB - 1) * 100;
      console.log(
        `${format}: peak RSS at ${large.rows} rows is ${growth >= 0 ? "+" : ""}${growth.toFixed(1)}% vs ${small.rows} rows (goal: within 10%)`,
      );
    }
  }
}

if (process.argv.includes("--child")) {
  await child(Number(argument("--rows")), argument("--format") === "json" ? "json" : "parquet");
} else {
  parent();
}
