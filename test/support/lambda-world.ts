/**
 * The world of an integration test that drives the Lambda handlers in
 * process, set up once: a fresh database on the suite's PostgreSQL, a fresh
 * bucket and (unless the test builds its own) a work queue on the S3/SQS
 * emulator, SQS and S3 clients on it, the functions' environment, and the
 * function containers opened from it with openLambdaAdapters. Each test is
 * then its scenario alone:
 *
 *   let world: LambdaWorld;
 *   beforeAll(async () => {
 *     world = await openLambdaWorld({ name: "segments", env: { ARCHIVER_REQUEUE_SECONDS: "0" } });
 *     inspector = await world.open({ migrate: true });
 *     worker = createWorkerHandler(world.container());
 *   });
 *   afterAll(() => world?.close());
 *
 * The inspector (the test's own view of the database and archive) and the
 * containers are opened by the test, in the order its scenario needs (a
 * discovery container may be the one that migrates). The world's output to
 * stdout and stderr (the functions' structured logs) is silenced until close.
 */
import { randomUUID } from "node:crypto";
import type { S3Client } from "@aws-sdk/client-s3";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { inject, vi } from "vitest";
import {
  cachedPerContainer,
  openLambdaAdapters,
  type LambdaAdapters,
} from "../../functions/open-adapters.js";
import type { Clock } from "../../src/ports/clock.js";
import { freshBucket, freshDatabase, s3Client } from "./integration-resources.js";
import { emulatorClientConfig } from "./lambda-invocation.js";

export interface LambdaWorldOptions {
  /** Names the archive prefix (`s3://<bucket>/<name>`) and the work queue. */
  name: string;
  /** Variables beyond the world's own (region, database, archive, endpoint, work queue). */
  env?: Record<string, string>;
  /** Create a plain work queue and name it in the environment (default true). */
  queue?: boolean;
  /** The functions' clock (default the system's). */
  clock?: Clock;
  /**
   * openLambdaAdapters' start-up check of the process clock against the
   * database's (default on): a manual clock that plays the functions' time,
   * months behind the database's, turns it off.
   */
  clockCheck?: boolean;
  /** The S3 client of the world (default one on the emulator). */
  s3?: S3Client;
}

/** How one opening differs from the world's. */
export interface OpenOptions {
  /** Variables added to (or replacing) the world's environment. */
  env?: Record<string, string>;
  /** Migrate the database first (a test's throwaway database; a deployed function never does). */
  migrate?: boolean;
  /** The S3 client of this opening (an instrumented one); closed with the world. */
  s3?: S3Client;
}

export interface LambdaWorld {
  readonly sqs: SQSClient;
  readonly s3: S3Client;
  /** The URL of the world's database. */
  readonly databaseUrl: string;
  /** The world's work queue ("" when it was opened with `queue: false`). */
  readonly queueUrl: string;
  /** The functions' environment. */
  readonly env: Readonly<Record<string, string>>;
  /** Everything opened through the world so far, in order. */
  readonly runtimes: readonly LambdaAdapters[];
  /** Open the adapters of one function, closed with the world. */
  open(options?: OpenOptions): Promise<LambdaAdapters>;
  /** A function container: opens on its first invocation and is kept for the later ones. */
  container(options?: OpenOptions): () => Promise<LambdaAdapters>;
  /** Close everything opened, drop the database, destroy the clients, restore the output. */
  close(): Promise<void>;
}

export async function openLambdaWorld(options: LambdaWorldOptions): Promise<LambdaWorld> {
  const endpoint = inject("awsEndpointUrl");
  const database = await freshDatabase(inject("databaseUrl"));
  const quiet = [
    vi.spyOn(process.stdout, "write").mockImplementation(() => true),
    vi.spyOn(process.stderr, "write").mockImplementation(() => true),
  ];
  const sqs = new SQSClient(emulatorClientConfig(endpoint));
  const s3 = options.s3 ?? s3Client(endpoint);
  const clients = new Set<{ destroy(): void }>([sqs, s3]);
  const runtimes: LambdaAdapters[] = [];
  const release = async () => {
    try {
      for (const runtime of runtimes) await runtime.close();
      await database.drop();
    } finally {
      for (const client of clients) client.destroy();
      for (const spy of quiet) spy.mockRestore();
    }
  };
  try {
    const bucket = await freshBucket(endpoint);
    const queueUrl =
      options.queue === false
        ? ""
        : (
            await sqs.send(
              new CreateQueueCommand({
                QueueName: `pulpitum-${options.name}-${randomUUID().slice(0, 8)}`,
              }),
            )
          ).QueueUrl!;
    const env: Record<string, string> = {
      AWS_REGION: "us-east-1",
      DATABASE_URL: database.url,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/${options.name}`,
      AWS_ENDPOINT_URL: endpoint,
      ...(queueUrl === "" ? {} : { PULPITUM_WORK_QUEUE_URL: queueUrl }),
      ...options.env,
    };
    const open = async (opening: OpenOptions = {}): Promise<LambdaAdapters> => {
      if (opening.s3 !== undefined) clients.add(opening.s3);
      const runtime = await openLambdaAdapters(
        { ...env, ...opening.env },
        {
          clients: { sqs, s3: opening.s3 ?? s3 },
          migrate: opening.migrate === true,
          clock: options.clock,
          clockCheck: options.clockCheck,
        },
      );
      runtimes.push(runtime);
      return runtime;
    };
    return {
      sqs,
      s3,
      databaseUrl: database.url,
      queueUrl,
      env,
      runtimes,
      open,
      container: (opening) => cachedPerContainer(() => open(opening)),
      close: release,
    };
  } catch (error) {
    await release();
    throw error;
  }
}
