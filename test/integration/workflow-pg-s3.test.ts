/**
 * The workflow on the real adapters: PostgreSQL and S3 (moto, or any
 * endpoint in AWS_ENDPOINT_URL). The crash-after-upload and lost-commit-reply
 * cases and two workers racing on one bucket, plus `pulpitum archive --once`
 * over imported tables of both formats.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import { parseTableId } from "../../src/domain/table.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  harnessOn,
  readBucketAsReader,
  expectSameRecords,
  seedTable,
  type Harness,
} from "../support/workflow-harness.js";

describe("the archival workflow on PostgreSQL and S3", () => {
  let databaseUrl: string;
  let drop: () => Promise<void>;
  let bucket: string;
  const endpoint = inject("awsEndpointUrl");
  const stores: SqlHotStore[] = [];
  const clients: ReturnType<typeof s3Client>[] = [];

  beforeAll(async () => {
    const db = await freshDatabase(inject("databaseUrl"));
    databaseUrl = db.url;
    drop = db.drop;
    bucket = await freshBucket(endpoint);
    const store = new SqlHotStore(new PgDatabase(databaseUrl));
    await store.migrate();
    await store.close();
  });
  afterAll(async () => {
    for (const s of stores) await s.close();
    for (const c of clients) c.destroy();
    await drop();
  });

  function open(faults?: PgDatabase["faults"]): { store: SqlHotStore; objects: S3ObjectStore } {
    const database = new PgDatabase(databaseUrl);
    database.faults = faults;
    const store = new SqlHotStore(database);
    stores.push(store);
    const client = s3Client(endpoint);
    clients.push(client);
    return { store, objects: new S3ObjectStore({ bucket, client }) };
  }

  function harness(table: string): Harness<S3ObjectStore> {
    const { store, objects } = open();
    return harnessOn(store, objects, { archivePrefix: `wf/${table}` });
  }

  it("a crash after the payload upload is repaired by a takeover that finds the same object", async () => {
    const h = harness("crash_upload");
    const table = parseTableId("crash_upload");
    const expected = await seedTable(
      h,
      table,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([3, 4], 120),
    );
    const { ctx } = h.process({
      object: {
        operation: "createIfAbsent",
        when: "after",
        kind: "crash",
        keyIncludes: "/payloads/",
      },
    });
    const { id } = [...expected.values()][0]!;
    expect((await runNextPhase(ctx, id)).result).toBe("advanced"); // claim
    await expect(runNextPhase(ctx, id)).rejects.toThrow(/simulated crash/);
    expectSameRecords(await readBucketAsReader(h, id), [...expected.values()][0]!.records);
    h.clock.advance(h.settings.leaseMs + 1_000);
    await converge(h, expected);
    await expectFullyArchived(h, expected);
  });

  it("a lost commit reply to publish is resolved by re-reading: the bucket is archived once", async () => {
    let armed = true;
    const { store, objects } = open({
      afterCommit(operation) {
        if (armed && operation === "publish") {
          armed = false;
          throw new Error("connection reset while COMMIT was in flight");
        }
      },
    });
    const h = harnessOn(store, objects, { archivePrefix: "wf/lost_reply" });
    const table = parseTableId("lost_reply");
    const expected = await seedTable(
      h,
      table,
      "CalendarMonthUtc",
      "json",
      chatRecords([5], 80, ["solo"]),
    );
    const { id } = [...expected.values()][0]!;
    const { ctx } = h.process();
    const outcomes = [];
    for (let i = 0; i < 5; i++) outcomes.push(await runNextPhase(ctx, id));
    expect(armed).toBe(false);
    expect(outcomes.map((o) => `${o.phase}:${o.result}`)).toEqual([
      "claim:advanced",
      "export:advanced",
      "seal:advanced",
      "publish:advanced",
      "cleanup:advanced",
    ]);
    await expectFullyArchived(h, expected);
  });

  it("two workers on separate connections racing on one bucket: one runs each phase, the other is told busy", async () => {
    const a = harness("race");
    const { store: otherStore, objects: otherObjects } = open();
    const b = harnessOn(otherStore, otherObjects, { archivePrefix: "wf/race" });
    const table = parseTableId("race");
    const expected = await seedTable(
      a,
      table,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([6], 200, ["solo"]),
    );
    const { id } = [...expected.values()][0]!;
    const seen: string[] = [];
    for (let round = 0; round < 12; round++) {
      const [x, y] = await Promise.all([
        runNextPhase(a.process().ctx, id),
        runNextPhase(b.process().ctx, id),
      ]);
      seen.push(x.result, y.result);
      if (x.next === null || y.next === null) break;
    }
    expect(seen).toContain("busy");
    await converge(a, expected);
    await expectFullyArchived(a, expected);
  });

  it("pulpitum archive --once archives imported tables of both formats and leaves no hot rows in archived buckets; restore brings one back from S3", async () => {
    const home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-"));
    // Its own database: the file's other tests archive to the bucket's root, and a database
    // belongs to one archive (docs/operations.md).
    const cliDb = await freshDatabase(inject("databaseUrl"));
    onTestFinished(() => cliDb.drop());
    try {
      const env = {
        DATABASE_URL: cliDb.url,
        PULPITUM_ARCHIVE_URL: `s3://${bucket}/cli`,
        AWS_ENDPOINT_URL: endpoint,
        AWS_ACCESS_KEY_ID: "test",
        AWS_SECRET_ACCESS_KEY: "test",
        AWS_REGION: "us-east-1",
        PULPITUM_HOME: home,
        ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
      };
      expect((await runCli(["migrate"], env)).code).toBe(0);
      expect((await runCli(["migrate", "--json"], env)).stdout).toMatch(/"applied": \[\]/);
      expect(
        (
          await runCli(
            ["tables", "create", "cli_pq", "--strategy", "month", "--format", "parquet"],
            env,
          )
        ).code,
      ).toBe(0);
      expect(
        (await runCli(["tables", "create", "cli_js", "--strategy", "day", "--format", "json"], env))
          .code,
      ).toBe(0);
      const lines: string[] = [];
      for (let m = 9; m <= 12; m++) {
        for (let i = 0; i < 40; i++) {
          lines.push(
            JSON.stringify({
              partition_key: Buffer.from(`p${i % 3}`).toString("base64"),
              event_time: `2025-${String(m).padStart(2, "0")}-${String(1 + (i % 20)).padStart(2, "0")}T01:02:03.${String(i).padStart(6, "0")}Z`,
              sort_key: Buffer.from([i, m]).toString("base64"),
              value: Buffer.from(`v-${m}-${i}`).toString("base64"),
            }),
          );
        }
      }
      const file = path.join(home, "records.ndjson");
      writeFileSync(file, lines.join("\n"));
      for (const t of ["cli_pq", "cli_js"])
        expect((await runCli(["import", t, file], env)).code).toBe(0);
      const archived = await runCli(["archive", "--once"], env);
      expect(archived.code, archived.stderr).toBe(0);
      const status = JSON.parse((await runCli(["status", "--json"], env)).stdout);
      for (const t of status.tables.filter((x: { table_id: string }) =>
        x.table_id.startsWith("cli_"),
      )) {
        expect(t.states).toEqual([
          expect.objectContaining({
            state: "archived",
            hot_deleted: true,
            hot_rows: 0,
            archived_rows: lines.length,
          }),
        ]);
      }
      for (const t of ["cli_pq", "cli_js"]) {
        let total = 0;
        for (const p of ["p0", "p1", "p2"]) {
          const r = await runCli(["read", t, p, "--json", "--limit", "1000"], env);
          total += JSON.parse(r.stdout).records.length;
        }
        expect(total).toBe(lines.length);
      }

      // Restore one archived bucket from S3 into PostgreSQL: every row comes back once.
      const restored = await runCli(["restore", "cli_pq", "p0", "month:2025-10", "--json"], env);
      expect(restored.code, restored.stderr).toBe(0);
      const inBucket = lines.filter((l) => {
        const r = JSON.parse(l) as { partition_key: string; event_time: string };
        return (
          r.partition_key === Buffer.from("p0").toString("base64") &&
          r.event_time.startsWith("2025-10")
        );
      }).length;
      expect(JSON.parse(restored.stdout)).toMatchObject({
        result: "restored",
        rows_inserted: inBucket,
        rows_verified: 0,
      });
      const p0 = await runCli(["read", "cli_pq", "p0", "--json", "--limit", "1000"], env);
      const p0Records = JSON.parse(p0.stdout).records as Array<{ event_time: string }>;
      expect(p0Records.filter((r) => r.event_time.startsWith("2025-10"))).toHaveLength(inBucket);
      // Its old archive objects are unreferenced now but young: a dry run keeps them.
      const gc = await runCli(["gc", "--dry-run", "--json"], env);
      expect(gc.code, gc.stderr).toBe(0);
      const report = JSON.parse(gc.stdout);
      expect(report).toMatchObject({ dry_run: true, deleted_objects: 0, orphans: [] });
      expect(report.kept.young).toBeGreaterThanOrEqual(2);
      expect(report.kept.referenced).toBeGreaterThan(0);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
