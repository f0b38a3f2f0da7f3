/**
 * `pulpitum invoke FUNCTION --stack-outputs FILE` runs the deployed function
 * once (issue 51 §3): an operator's action is invoked asynchronously (one
 * POST, nothing a client timeout can repeat) and followed in the audit
 * trail to its outcome; a dry run is invoked synchronously with one
 * request; a bad event is refused here, before any invocation. On
 * PostgreSQL and moto, with the stack's functions run by the Lambda
 * stand-in, which counts every invocation.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { runCli } from "../support/cli.js";
import { freshDatabase } from "../support/integration-resources.js";
import type { LambdaEmulator } from "../support/lambda-emulator-process.js";
import { operatorEnv, standInStack, type StackStandIn } from "../support/stack-stand-in.js";

const ROOT = path.resolve(import.meta.dirname, "..", "..");
const sample = (name: string) => path.join(ROOT, "events", name);

describe("pulpitum invoke against a deployed stack", () => {
  const endpoint = inject("awsEndpointUrl");
  const operator = operatorEnv(endpoint);
  let db: { url: string; drop(): Promise<void> };
  let work: string;
  let stack: StackStandIn;
  let lambda: LambdaEmulator;
  let env: Record<string, string | undefined>;

  beforeAll(async () => {
    db = await freshDatabase(inject("databaseUrl"));
    work = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-invoke-"));
    const app = { ...operator, DATABASE_URL: db.url, PULPITUM_HOME: path.join(work, "home") };
    expect((await runCli(["migrate"], app)).code).toBe(0);
    stack = await standInStack({ endpoint, databaseUrl: db.url, dir: work });
    lambda = await stack.startFunctions();
    const archive = { ...app, PULPITUM_ARCHIVE_URL: stack.outputs.ArchiveUrl };
    expect(
      (await runCli(["tables", "create", "events", "--strategy", "month"], archive)).code,
    ).toBe(0);
    const records = path.join(work, "events.ndjson");
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    writeFileSync(
      records,
      [1, 2, 3]
        .map((d) =>
          JSON.stringify({
            partition_key: b64("tenant-42"),
            event_time: `2024-02-0${d}T00:00:00Z`,
            sort_key: b64(`k${d}`),
            value: b64(`v${d}`),
          }),
        )
        .join("\n"),
    );
    expect((await runCli(["import", "events", records], archive)).code).toBe(0);
    // The operator follows the trail as the database's role (here its owner).
    env = {
      ...operator,
      AWS_ENDPOINT_URL_LAMBDA: lambda.endpoint,
      DATABASE_URL: db.url,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
      PULPITUM_HOME: path.join(work, "home"),
    };
  }, 120_000);
  afterAll(async () => {
    await lambda?.stop();
    await db?.drop();
    rmSync(work, { recursive: true, force: true });
  });

  const invoke = (fn: string, ...args: string[]) =>
    runCli(["invoke", fn, ...args, "--stack-outputs", stack.outputsFile], env);

  it("invokes a manual worker run once, asynchronously, and prints its outcome from the audit trail", async () => {
    const run = await invoke("worker", "--event", sample("manual-bucket.json"));

    expect(run.code, `${run.stderr}\n${lambda.stderr()}`).toBe(0);
    const invocations = lambda.invocations(stack.functionName("worker"));
    expect(invocations).toEqual([{ type: "Event", requestId: expect.any(String) }]);
    expect(run.stderr).toContain(`request id ${invocations[0]!.requestId}`);
    const record = JSON.parse(run.stdout);
    expect(record).toMatchObject({
      action: "archive bucket",
      outcome: "done",
      caller: { kind: "lambda", request_id: invocations[0]!.requestId },
    });
  }, 120_000);

  it("runs a dry run synchronously with one request and prints the function's report", async () => {
    const run = await invoke("gc", "--event", sample("gc-dry-run.json"));

    expect(run.code, run.stderr).toBe(0);
    expect(lambda.invocations(stack.functionName("gc"))).toEqual([
      { type: "RequestResponse", requestId: expect.any(String) },
    ]);
    expect(JSON.parse(run.stdout)).toMatchObject({ dry_run: true });
  }, 120_000);

  it("follows a restore, and a discovery and a scrub by hand, each started once, through the trail", async () => {
    const restore = await invoke("restore", "--event", sample("restore-bucket.json"));
    expect(restore.code, `${restore.stderr}\n${lambda.stderr()}`).toBe(0);
    expect(JSON.parse(restore.stdout)).toMatchObject({
      action: "restore",
      outcome: "done",
      result: { result: "restored" },
    });
    const discover = await invoke("discover");
    expect(JSON.parse(discover.stdout)).toMatchObject({ action: "discover", outcome: "done" });
    // Following as the stack's maintenance role when the operator has no DATABASE_URL.
    const scrub = await runCli(["invoke", "scrub", "--stack-outputs", stack.outputsFile], {
      ...env,
      DATABASE_URL: undefined,
    });
    expect(scrub.code, scrub.stderr).toBe(0);
    expect(JSON.parse(scrub.stdout)).toMatchObject({ action: "scrub", outcome: "done" });
    for (const key of ["restore", "discover", "scrub"] as const)
      expect(lambda.invocations(stack.functionName(key)), key).toHaveLength(1);
  }, 180_000);

  it("refuses a bad event before invoking anything, naming what is wrong", async () => {
    const bad = path.join(work, "bad-restore.json");
    writeFileSync(bad, JSON.stringify({ v: 1, table_id: "events", bucket_key: "month:2024-13" }));
    const before = lambda.invocations(stack.functionName("restore")).length;

    const run = await invoke("restore", "--event", bad);

    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/restore event/);
    expect(lambda.invocations(stack.functionName("restore"))).toHaveLength(before);
  }, 60_000);
});
