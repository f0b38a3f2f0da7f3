/**
 * Issue 30: an archive written by an older Pulpitum keeps reading. The
 * fixture (test/fixtures/d4d710f, see its generate.md) is what commit
 * d4d710f's CLI wrote in embedded mode: three tables, Parquet and JSON,
 * buckets of one part (manifest v4) and of several (manifest v5), and the
 * hot store's rows that publish them. Each test copies the archive into a
 * temporary PULPITUM_HOME, migrates a fresh embedded store to today's schema
 * and inserts the captured rows (the columns d4d710f had; newer ones take
 * their defaults), then reads every bucket with today's code.
 */
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import {
  METADATA_TABLE,
  PARTS_TABLE,
  RECORDS_TABLE,
  TABLES_TABLE,
} from "../../../src/adapters/sql/migrations.js";
import { SqlHotStore } from "../../../src/adapters/sql/index.js";
import { validateArchiveManifest } from "../../../src/archive/manifest-v5.js";
import { sealArchiveManifest } from "../../../src/archive/segments.js";
import { verifyArchive } from "../../../src/archive/verify.js";
import { EXIT } from "../../../src/cli/exit-codes.js";
import type { BucketId, BucketStrategy } from "../../../src/domain/bucket.js";
import { recordToJson, type RecordJson } from "../../../src/domain/record.js";
import { parseTableId, type ArchiveFormat } from "../../../src/domain/table.js";
import { dateToMicros } from "../../../src/domain/time.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import { loadConfig, openAdapters, type Adapters } from "../../../src/open-adapters.js";
import { DurableTable } from "../../../src/read/durable-table.js";
import { runCli } from "../../support/cli.js";

const FIXTURE = path.resolve(import.meta.dirname, "..", "..", "fixtures", "d4d710f");
/** Where generate.sh's home was: its catalog entries name payloads under this URL. */
const GENERATED_ROOT = "file:///tmp/pulpitum-d4d710f-fixture/archive/";

type Row = Record<string, unknown>;
const captured = (table: string): Row[] =>
  JSON.parse(readFileSync(path.join(FIXTURE, "hot", `${table}.json`), "utf8")) as Row[];

/** A `bytea` as row_to_json renders it (`\x` hex). */
const hexBytes = (value: unknown) => Buffer.from(String(value).slice(2), "hex");

interface FixtureBucket {
  readonly name: string;
  readonly id: BucketId;
  readonly strategy: BucketStrategy;
  readonly start: Date;
  readonly end: Date;
  readonly format: ArchiveFormat;
  readonly manifestKey: string;
  readonly manifestVersion: 4 | 5;
  /** The records imported into this bucket, in clustering order. */
  readonly records: readonly RecordJson[];
}

const formats = new Map(
  captured(TABLES_TABLE).map((t) => [t.table_id as string, t.archive_format as ArchiveFormat]),
);
const imported = new Map(
  [...formats.keys()].map((table) => [
    table,
    readFileSync(path.join(FIXTURE, "records", `${table}.ndjson`), "utf8")
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as RecordJson),
  ]),
);

const BUCKETS: readonly FixtureBucket[] = captured(METADATA_TABLE).map((m) => {
  const partitionKey = hexBytes(m.partition_key);
  const start = new Date(m.bucket_start as string);
  const end = new Date(m.bucket_end as string);
  const table = m.table_id as string;
  const manifestKey = m.manifest_key as string;
  const manifest = JSON.parse(readFileSync(path.join(FIXTURE, "archive", manifestKey), "utf8")) as {
    manifest_version: 4 | 5;
  };
  return {
    name: `${table}/${partitionKey.toString("base64")}/${m.bucket_key as string} (manifest v${manifest.manifest_version})`,
    id: { tableId: parseTableId(table), partitionKey, bucketKey: m.bucket_key as string },
    strategy: m.bucket_strategy as BucketStrategy,
    start,
    end,
    format: formats.get(table)!,
    manifestKey,
    manifestVersion: manifest.manifest_version,
    records: imported.get(table)!.filter((r) => {
      const t = Date.parse(r.event_time);
      return r.partition_key === partitionKey.toString("base64") && t >= +start && t < +end;
    }),
  };
});

const envOf = (home: string) => ({
  PULPITUM_HOME: home,
  DATABASE_URL: undefined,
  PULPITUM_ARCHIVE_URL: undefined,
});
/** The embedded store's database, for the captured rows and the restored ones. */
function databaseOf(rt: Adapters) {
  if (!(rt.hotStore instanceof SqlHotStore)) throw new Error("the embedded hot store is SQL");
  return rt.hotStore.db;
}

const open = (home: string) =>
  openAdapters(loadConfig({ PULPITUM_HOME: home }), { command: "d4d710f fixture test" });

/**
 * A PULPITUM_HOME holding the fixture: its archive copied (catalog entries
 * relocated from the generator's root to this one, nothing else changed) and
 * the captured rows inserted into a store migrated to today's schema.
 */
async function fixtureHome(): Promise<string> {
  const home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-d4d710f-"));
  const root = path.join(home, "archive");
  cpSync(path.join(FIXTURE, "archive"), root, { recursive: true });
  const base = (await new FileObjectStore(root).uri("k")).slice(0, -1);
  const catalog = path.join(root, "catalog");
  for (const entry of readdirSync(catalog, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    writeFileSync(file, readFileSync(file, "utf8").replaceAll(GENERATED_ROOT, base));
  }
  const rt = await open(home);
  try {
    const db = databaseOf(rt);
    for (const table of [TABLES_TABLE, METADATA_TABLE, PARTS_TABLE]) {
      for (const row of captured(table)) {
        const columns = Object.keys(row).join(", ");
        await db.query(
          `INSERT INTO ${table} (${columns}) SELECT ${columns} FROM json_populate_record(NULL::${table}, $1::json)`,
          [JSON.stringify(row)],
        );
      }
    }
  } finally {
    await rt.close();
  }
  return home;
}

describe("an archive written by d4d710f, read by today's code", () => {
  let home: string;
  let rt: Adapters;
  beforeAll(async () => {
    home = await fixtureHome();
    rt = await open(home);
  });
  afterAll(async () => {
    await rt?.close();
    rmSync(home, { recursive: true, force: true });
  });

  it("holds manifests of both versions, Parquet and JSON, so every case below is exercised", () => {
    const cases = new Set(BUCKETS.map((b) => `${b.format} v${b.manifestVersion}`));
    expect(cases).toEqual(new Set(["parquet v4", "parquet v5", "json v4", "json v5"]));
    expect(BUCKETS.every((b) => b.records.length > 0)).toBe(true);
  });

  it.each(BUCKETS)(
    "$name: its manifest validates, and verifies in full, against the parts the hot store lists",
    async (bucket) => {
      const parts = await rt.hotStore.listParts(bucket.id);
      expect(parts.length > 1).toBe(bucket.manifestVersion === 5);
      const expected = {
        prefix: rt.archivePrefix,
        bucket: { ...bucket.id, strategy: bucket.strategy, start: bucket.start, end: bucket.end },
        parts,
        format: bucket.format,
        manifestKey: bucket.manifestKey,
      };
      const manifest = validateArchiveManifest(
        await rt.objectStore.get(bucket.manifestKey),
        expected,
      );
      expect(manifest.row_count).toBe(bucket.records.length);
      const verified = await verifyArchive(rt.objectStore, bucket.manifestKey, {
        prefix: rt.archivePrefix,
        bucket: bucket.id,
        strategy: bucket.strategy,
        start: bucket.start,
        end: bucket.end,
        format: bucket.format,
        parts,
        verifyPayloadBytes: true,
      });
      expect(verified.parts.map((p) => p.key)).toEqual(parts.map((p) => p.key));
    },
  );

  it.each(BUCKETS)(
    "$name: reading its partition over its bounds returns exactly the imported records",
    async (bucket) => {
      const table = new DurableTable({
        hotStore: rt.hotStore,
        objectStore: rt.objectStore,
        clock: rt.clock,
        archivePrefix: rt.archivePrefix,
      });
      const read: RecordJson[] = [];
      let cursor: string | undefined;
      do {
        const page = await table.read(bucket.id.tableId, bucket.id.partitionKey, {
          from: dateToMicros(bucket.start),
          to: dateToMicros(bucket.end),
          limit: 37,
          cursor,
        });
        read.push(...page.records.map(recordToJson));
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
      expect(read).toEqual(bucket.records);
    },
  );

  it.each(BUCKETS)(
    "$name: sealing the listed parts again at the manifest's generation writes the fixture's manifest byte for byte",
    async (bucket) => {
      const fixtureBytes = readFileSync(path.join(FIXTURE, "archive", bucket.manifestKey));
      const { generation } = JSON.parse(fixtureBytes.toString("utf8")) as { generation: number };
      const parts = await rt.hotStore.listParts(bucket.id);
      // A store holding only the payloads: the manifest is written, not found.
      const payloadsOnly = new FileObjectStore(
        mkdtempSync(path.join(os.tmpdir(), "pulpitum-reseal-")),
      );
      try {
        for (const part of parts) {
          await payloadsOnly.createIfAbsent(part.key, await rt.objectStore.get(part.key));
        }
        const key = await sealArchiveManifest({
          store: payloadsOnly,
          prefix: rt.archivePrefix,
          bucket: bucket.id,
          strategy: bucket.strategy,
          start: bucket.start,
          end: bucket.end,
          generation,
          format: bucket.format,
          parts,
        });
        expect(key).toBe(bucket.manifestKey);
        expect(Buffer.from(await payloadsOnly.get(key)).equals(fixtureBytes)).toBe(true);
      } finally {
        rmSync(payloadsOnly.root, { recursive: true, force: true });
      }
    },
  );

  it("a byte flipped in one part of a fixture bucket fails its verification, naming the part", async () => {
    const bucket = BUCKETS.find((b) => b.manifestVersion === 5 && b.format === "parquet")!;
    const parts = await rt.hotStore.listParts(bucket.id);
    const damaged = new FileObjectStore(mkdtempSync(path.join(os.tmpdir(), "pulpitum-flipped-")));
    try {
      await damaged.createIfAbsent(
        bucket.manifestKey,
        await rt.objectStore.get(bucket.manifestKey),
      );
      for (const part of parts) {
        const bytes = Buffer.from(await rt.objectStore.get(part.key));
        if (part.index === 1) bytes[bytes.length >> 1]! ^= 0x01;
        await damaged.createIfAbsent(part.key, bytes);
      }
      const verifying = verifyArchive(damaged, bucket.manifestKey, {
        prefix: rt.archivePrefix,
        bucket: bucket.id,
        format: bucket.format,
        parts,
      });
      await expect(verifying).rejects.toThrow(ArchiveIntegrityError);
      await expect(verifying).rejects.toThrow(parts[1]!.key);
    } finally {
      rmSync(damaged.root, { recursive: true, force: true });
    }
  });
});

describe("an archive written by d4d710f, through today's CLI", () => {
  let home: string;
  beforeAll(async () => {
    home = await fixtureHome();
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  const bucketArgs = (b: FixtureBucket) => [
    b.id.tableId,
    b.id.bucketKey,
    "--partition-key-b64",
    Buffer.from(b.id.partitionKey).toString("base64"),
  ];

  it.each(BUCKETS)(
    "$name: `pulpitum query` over the catalog entries d4d710f wrote counts its imported records",
    async (bucket) => {
      const sql = `SELECT count(*) AS n FROM ${bucket.id.tableId}
        WHERE partition_key = from_base64('${Buffer.from(bucket.id.partitionKey).toString("base64")}')
          AND event_time >= '${bucket.start.toISOString()}'::TIMESTAMP
          AND event_time < '${bucket.end.toISOString()}'::TIMESTAMP`;
      const run = await runCli(["query", bucket.id.tableId, sql, "--json"], envOf(home));
      expect(run.code, run.stderr).toBe(EXIT.ok);
      expect(JSON.parse(run.stdout)).toEqual({ n: bucket.records.length });
    },
  );

  describe("after `pulpitum catalog rebuild`, the upgrade step for entries written before they had versions", () => {
    beforeAll(async () => {
      const run = await runCli(["catalog", "rebuild"], envOf(home));
      expect(run.code, run.stderr).toBe(EXIT.ok);
    });

    it.each(BUCKETS)("$name: `pulpitum verify --bucket` passes", async (bucket) => {
      const run = await runCli(
        ["verify", "--bucket", ...bucketArgs(bucket), "--json"],
        envOf(home),
      );
      expect(run.code, run.stderr).toBe(EXIT.ok);
      expect(JSON.parse(run.stdout)).toMatchObject({
        verified: 1,
        corrupt: 0,
        catalog_problems: 0,
      });
    });
  });
});

describe("a bucket of the d4d710f archive restored by today's code", () => {
  let home: string;
  beforeAll(async () => {
    home = await fixtureHome();
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("comes back to the hot store with each imported record exactly once, for a v4 and a v5 bucket", async () => {
    const v4 = BUCKETS.find((b) => b.manifestVersion === 4 && b.format === "json")!;
    const v5 = BUCKETS.find((b) => b.manifestVersion === 5 && b.format === "parquet")!;
    for (const bucket of [v4, v5]) {
      const run = await runCli(
        ["restore", bucket.id.tableId, bucket.id.bucketKey, "--partition-key-b64"].concat(
          Buffer.from(bucket.id.partitionKey).toString("base64"),
        ),
        envOf(home),
      );
      expect(run.code, run.stderr).toBe(EXIT.ok);
    }
    const rt = await open(home);
    try {
      const db = databaseOf(rt);
      for (const bucket of [v4, v5]) {
        const { rows } = await db.query<{ event_time: string; sort_key: Buffer; value: Buffer }>(
          `SELECT to_char(event_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS event_time,
                  sort_key, value
             FROM ${RECORDS_TABLE}
            WHERE table_id = $1 AND partition_key = $2 AND bucket_key = $3
            ORDER BY event_time, sort_key`,
          [bucket.id.tableId, bucket.id.partitionKey, bucket.id.bucketKey],
        );
        expect(
          rows.map((r) => ({
            partition_key: Buffer.from(bucket.id.partitionKey).toString("base64"),
            event_time: r.event_time,
            sort_key: Buffer.from(r.sort_key).toString("base64"),
            value: Buffer.from(r.value).toString("base64"),
          })),
        ).toEqual(bucket.records);
        expect((await rt.hotStore.getBucket(bucket.id))?.state).toBe("hot");
      }
    } finally {
      await rt.close();
    }
  });
});
