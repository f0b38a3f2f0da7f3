/**
 * The operator's listings, end to end on the embedded store: `pulpitum
 * erasures` lists every job with its status, pending buckets and the
 * scrub's proof (what the ErasuresNotProven alarm needs), `erasures JOB`
 * its receipt; `status` does not say nothing eligible waits while it lists
 * an eligible bucket in flight; a human `read` cuts a 2 MB value.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqlErasureStore } from "../../../src/adapters/sql/erasure-store.js";
import { PgliteDatabase } from "../../../src/adapters/sql/pglite-database.js";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { runCli } from "../../support/cli.js";

const DONE_KEY = Buffer.from("customer-42");
const PENDING_KEY = Buffer.from([0, 0xff, 0x2f]);
const BIG_KEY = Buffer.from("customer-9");
const b64 = (b: Buffer) => b.toString("base64");
const record = (key: Buffer, t: string, i: number, value: Buffer = Buffer.from(`v${i}`)) =>
  JSON.stringify({
    partition_key: b64(key),
    event_time: t,
    sort_key: b64(Buffer.from([i])),
    value: b64(value),
  });

interface JobJson {
  job_id: string;
  status: string;
  pending_buckets: number;
  done_buckets: number;
  records_removed: number;
  proved_at: string | null;
  proof_problems: number | null;
  partition_key_b64: string;
}

describe("the operator's listings", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  let doneJob: string;
  let pendingJob: string;
  const cli = (...args: string[]) => runCli(args, env);
  const sql = async (fn: (db: PgliteDatabase) => Promise<unknown>) => {
    const db = await PgliteDatabase.open(path.join(home, "db"));
    try {
      await fn(db);
    } finally {
      await db.close();
    }
  };
  /** What another archiver's lease looks like: live for an hour. */
  const leaseElsewhere = (where: string) =>
    sql((db) =>
      db.query(
        `UPDATE pulpitum_v4_bucket_metadata
            SET owner_token = 'another-archiver', generation = generation + 1,
                lease_expires_at = now() + interval '1 hour'
          WHERE ${where}`,
      ),
    );

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-listings-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-06-01T00:00:00Z",
    };
    expect((await cli("tables", "create", "chat", "--strategy", "month")).code).toBe(0);
    const lines = [DONE_KEY, PENDING_KEY].flatMap((key) => [
      record(key, "2025-01-02T00:00:00Z", 0),
      record(key, "2025-01-03T00:00:00Z", 1),
      record(key, "2025-09-02T00:00:00Z", 2),
    ]);
    lines.push(record(BIG_KEY, "2025-09-02T00:00:00Z", 0, Buffer.alloc(2 * 1024 * 1024, "x")));
    const file = path.join(home, "in.ndjson");
    writeFileSync(file, lines.join("\n"));
    expect((await cli("import", "chat", file)).code).toBe(0);
    expect((await cli("archive", "--once")).code).toBe(0);
  }, 120_000);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("erasures lists each job with its status, pending buckets and proof, and narrows by status and proof", async () => {
    expect((await cli("erasures")).stdout).toBe("no erasure jobs\n");

    const done = await cli("erase", "chat", "customer-42", "--yes", "--json");
    expect(done.code, done.stderr).toBe(0);
    doneJob = (JSON.parse(done.stdout) as { job_id: string }).job_id;
    await leaseElsewhere(`bucket_key = 'month:2025-01' AND partition_key = '\\x00ff2f'::bytea`);
    const pending = await cli("erase", "chat", `b64:${b64(PENDING_KEY)}`, "--yes", "--json");
    expect(pending.code).toBe(EXIT.failure);
    pendingJob = (JSON.parse(pending.stdout) as { job_id: string }).job_id;
    // The scrub's proof of the done job found records of the key still readable.
    await sql((db) => new SqlErasureStore(db).recordProof(doneJob, 2, new Date()));

    const listed = await cli("erasures", "--json");
    expect(listed.code, listed.stderr).toBe(0);
    const jobs = JSON.parse(listed.stdout) as JobJson[];
    expect(jobs.map((j) => j.job_id)).toEqual([pendingJob, doneJob]);
    expect(jobs[0]).toMatchObject({
      status: "pending",
      partition_key_b64: b64(PENDING_KEY),
      pending_buckets: 1,
      done_buckets: 1,
      records_removed: 1,
      proved_at: null,
      proof_problems: null,
    });
    expect(jobs[1]).toMatchObject({
      status: "done",
      pending_buckets: 0,
      done_buckets: 2,
      records_removed: 3,
      proof_problems: 2,
      proved_at: expect.stringMatching(/^20\d\d-/),
    });

    const text = await cli("erasures");
    expect(text.stdout).toMatch(
      new RegExp(
        `^${pendingJob} +chat +b64:AP8v +all time +pending +1 done, 1 pending +1 +\\S+ +-$`,
        "m",
      ),
    );
    expect(text.stdout).toMatch(
      new RegExp(
        `^${doneJob} +chat +customer-42 +all time +done +2 +3 +\\S+ +NOT proven \\S+: 2 problems$`,
        "m",
      ),
    );
    expect(text.stdout).toContain("1 job not done: run the same `pulpitum erase` again");
    expect(text.stdout).toContain(
      "1 job NOT proven: `pulpitum verify --erasure JOB` names the buckets",
    );

    const unproven = JSON.parse(
      (await cli("erasures", "--unproven", "--json")).stdout,
    ) as JobJson[];
    expect(unproven.map((j) => j.job_id)).toEqual([doneJob]);
    const waiting = JSON.parse(
      (await cli("erasures", "--status", "pending", "--table", "chat", "--json")).stdout,
    ) as JobJson[];
    expect(waiting.map((j) => j.job_id)).toEqual([pendingJob]);
    expect((await cli("erasures", "--table", "other")).stdout).toBe(
      "no erasure jobs of table other\n",
    );
  });

  it("erasures JOB prints the job's receipt, with why a pending bucket waits; an unknown job is refused", async () => {
    const one = await cli("erasures", pendingJob);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(
      new RegExp(`^erasure job ${pendingJob}: pending; chat partition b64:AP8v, all time;`),
    );
    expect(one.stdout).toMatch(/^month:2025-01 +archive +pending +0 +- +\S.*$/m);
    expect(one.stdout).toMatch(/^month:2025-09 +hot +done +1 +\d+ +-$/m);
    const json = JSON.parse((await cli("erasures", pendingJob, "--json")).stdout) as {
      receipt: { bucket_key: string; status: string; reason: string | null }[];
    };
    expect(json.receipt.map((l) => [l.bucket_key, l.status])).toEqual([
      ["month:2025-01", "pending"],
      ["month:2025-09", "done"],
    ]);
    expect(json.receipt[0]!.reason).toMatch(/lease/);

    const unknown = await cli("erasures", "no-such-job");
    expect(unknown.code).toBe(EXIT.invalidInput);
    expect(unknown.stderr).toMatch(/erasure job "no-such-job": does not exist; expected a job id/);
    expect((await cli("erasures", pendingJob, "--status", "done")).code).toBe(EXIT.usage);
  });

  it("status names an eligible bucket in flight rather than saying none waits", async () => {
    expect((await cli("tables", "create", "logs", "--strategy", "month")).code).toBe(0);
    const file = path.join(home, "logs.ndjson");
    writeFileSync(file, record(Buffer.from("app"), "2025-02-02T00:00:00Z", 0));
    expect((await cli("import", "logs", file)).code).toBe(0);
    await leaseElsewhere(`table_id = 'logs'`);

    const status = await cli("status");
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(
      /^no eligible bucket is waiting for discovery \(besides the in flight ones listed below\)$/m,
    );
    expect(status.stdout).toMatch(/^in flight \(\d+\):\n(?: .*\n)*? {2}logs\/app\/month:2025-02 /m);
  });

  it("a human read cuts a 2 MB value and says where it is whole", async () => {
    const text = await cli("read", "chat", "customer-9");
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout.length).toBeLessThan(2_000);
    expect(text.stdout).toContain(`${"x".repeat(200)}… (2097152 bytes)`);
    expect(text.stdout).toContain(
      "(values longer than 200 characters are cut; --json or `pulpitum export` gives them whole)",
    );
    const json = JSON.parse((await cli("read", "chat", "customer-9", "--json")).stdout) as {
      records: { value: string }[];
    };
    expect(Buffer.from(json.records[0]!.value, "base64").length).toBe(2 * 1024 * 1024);
  });
});
