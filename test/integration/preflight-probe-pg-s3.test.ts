/**
 * The preflight proves the deployed functions' own path (issue 51 §1): a
 * stack whose subnets have no route to S3 passes every check made from the
 * operator's machine, so `pulpitum doctor --stack-outputs` invokes each
 * function with the probe event and fails naming the function and the hop.
 * On PostgreSQL and moto, with the functions run by a Lambda stand-in whose
 * S3 goes to an endpoint that drops every connection, while the doctor's
 * own S3 is moto; then with S3 reachable for the functions too, every probe
 * passes, and GC collects the objects the probes wrote.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ListObjectsV2Command } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { openPgHotStore } from "../../src/adapters/sql/index.js";
import { ManualClock } from "../../src/ports/clock.js";
import { silentLog } from "../../src/usecases/context.js";
import { collectGarbage } from "../../src/usecases/gc.js";
import { runCli } from "../support/cli.js";
import { freshDatabase, s3Client } from "../support/integration-resources.js";
import { startConnectionSink, type LambdaEmulator } from "../support/lambda-emulator-process.js";
import { operatorEnv, standInStack, type StackStandIn } from "../support/stack-stand-in.js";

interface Check {
  check: string;
  status: "ok" | "warn" | "fail" | "skip";
  detail: string;
  fix?: string;
}

describe("the preflight's probes of the deployed functions", () => {
  const endpoint = inject("awsEndpointUrl");
  const s3 = s3Client(endpoint);
  const operator = operatorEnv(endpoint);
  let db: { url: string; drop(): Promise<void> };
  let work: string;
  let stack: StackStandIn;
  let sink: { endpoint: string; close(): Promise<void> };
  let noRouteToS3: LambdaEmulator;
  let routed: LambdaEmulator;

  beforeAll(async () => {
    db = await freshDatabase(inject("databaseUrl"));
    work = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-probe-"));
    expect((await runCli(["migrate"], { ...operator, DATABASE_URL: db.url })).code).toBe(0);
    stack = await standInStack({ endpoint, databaseUrl: db.url, dir: work });
    sink = await startConnectionSink();
    noRouteToS3 = await stack.startFunctions({ AWS_ENDPOINT_URL_S3: sink.endpoint });
    routed = await stack.startFunctions();
  }, 120_000);
  afterAll(async () => {
    await noRouteToS3?.stop();
    await routed?.stop();
    await sink?.close();
    s3.destroy();
    await db?.drop();
    rmSync(work, { recursive: true, force: true });
  });

  async function preflight(lambda: LambdaEmulator) {
    const run = await runCli(["doctor", "--json", "--stack-outputs", stack.outputsFile], {
      ...operator,
      AWS_ENDPOINT_URL_LAMBDA: lambda.endpoint,
    });
    const checks = new Map(
      (JSON.parse(run.stdout).checks as Check[]).map((c) => [c.check, c] as const),
    );
    return { code: run.code, checks };
  }

  it("fails naming each function whose subnets cannot reach S3 and the hop, though this machine reaches it", async () => {
    const { code, checks } = await preflight(noRouteToS3);

    expect(code).toBe(1);
    // The operator's own path to the archive is fine.
    expect(checks.get("archive")?.status).toBe("ok");
    for (const key of ["worker", "erase"] as const) {
      const check = checks.get(`function ${key}`);
      expect(check?.status, noRouteToS3.stderr()).toBe("fail");
      expect(check?.detail).toMatch(
        new RegExp(`^${stack.functionName(key)}: archive read failed: .*; archive create failed: `),
      );
      expect(check?.fix).toContain("-c pulpitum:routeTableIds=");
      expect(check?.fix).toContain("-c pulpitum:s3Route=nat");
    }
    for (const key of ["gc", "scrub", "restore"] as const) {
      expect(checks.get(`function ${key}`)?.status).toBe("fail");
      expect(checks.get(`function ${key}`)?.detail).toMatch(/: archive read failed: /);
      expect(checks.get(`function ${key}`)?.detail).not.toMatch(/database/);
    }
    // The functions that touch no archive reach their queues and database.
    expect(checks.get("function discover")?.status).toBe("ok");
    expect(checks.get("function discover")?.detail).toMatch(
      /database secret, configuration, work queue, database reached/,
    );
    expect(checks.get("function replay-dlq")?.detail).toMatch(
      /database secret, configuration, dead-letter queue, work queue, database reached from inside the function/,
    );
  }, 180_000);

  it("passes once the functions reach S3 too, and GC collects the objects the probes wrote", async () => {
    const { code, checks } = await preflight(routed);

    const failed = [...checks.values()].filter((c) => c.status === "fail");
    expect(failed, routed.stderr()).toEqual([]);
    expect(code).toBe(0);
    for (const key of Object.values(stack.functions))
      expect(checks.get(`function ${key}`)?.status, key).toBe("ok");
    expect(checks.get("function worker")?.detail).toMatch(
      /database secret, configuration, archive read, archive create, work queue, database reached/,
    );
    const listProbes = async () =>
      (await s3.send(new ListObjectsV2Command({ Bucket: stack.bucket, Prefix: "pulpitum/probe/" })))
        .Contents ?? [];
    expect((await listProbes()).map((o) => o.Key!.split("/")[2]).sort()).toEqual(
      [stack.functionName("erase"), stack.functionName("worker")].sort(),
    );

    // A GC run two hours on (the probes' objects are older than its one-hour minimum age by then).
    const hotStore = await openPgHotStore(db.url);
    try {
      const report = await collectGarbage(
        {
          hotStore,
          objectStore: new S3ObjectStore({ bucket: stack.bucket, client: s3 }),
          clock: new ManualClock(new Date(Date.now() + 2 * 3_600_000)),
          archivePrefix: "pulpitum",
          log: silentLog,
        },
        { minAgeMs: 3_600_000, dryRun: false, leaseMs: 60_000 },
      );
      expect(report.deleted_objects).toBe(2);
    } finally {
      await hotStore.close();
    }
    expect(await listProbes()).toEqual([]);
  }, 180_000);
});
