/**
 * The S3 and SQS client timeouts (PULPITUM_S3_* / PULPITUM_SQS_*) against
 * real stalled sockets: a server that accepts and never answers, one that
 * stops in the middle of a response body, and a port whose connection
 * attempts are never completed. Each call must fail with the port's
 * retryable error instead of waiting forever, through the adapters and
 * through the runtimes built from the configuration.
 */
import net from "node:net";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { httpTimeoutsFromSeconds } from "../../src/adapters/http-timeouts.js";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { createSqsClient, SqsWorkQueue } from "../../src/adapters/queue/sqs.js";
import { parseConfig } from "../../src/config/config.js";
import { parseTableId } from "../../src/domain/table.js";
import { TransientStoreError } from "../../src/errors.js";
import { openAdapters } from "../../src/open-adapters.js";
import { openLambdaAdapters } from "../../functions/open-adapters.js";
import { freshDatabase } from "../support/integration-resources.js";
import {
  settleWithin,
  startSilentServer,
  startUnacceptingListener,
  type StalledEndpoint,
} from "../support/stalled-endpoints.js";

const credentials = { accessKeyId: "test", secretAccessKey: "test" };
const item = {
  tableId: parseTableId("timeouts"),
  partitionKey: new Uint8Array([1]),
  bucketKey: "year:2025",
};

function storeAt(port: number, timeouts = httpTimeoutsFromSeconds(1, 1)): S3ObjectStore {
  return new S3ObjectStore({
    bucket: "stalled",
    endpoint: `http://127.0.0.1:${port}`,
    forcePathStyle: true,
    timeouts,
    clientConfig: { credentials, maxAttempts: 2 },
  });
}

/** Answers every request with headers promising 1,000 bytes, sends 10, then goes silent. */
async function startStallingBodyServer(): Promise<StalledEndpoint> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
    socket.once("data", () =>
      socket.write(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n0123456789",
      ),
    );
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    port: (server.address() as net.AddressInfo).port,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const endpoints: StalledEndpoint[] = [];
let silent: StalledEndpoint;
let unaccepting: StalledEndpoint;
let stallingBody: StalledEndpoint;

beforeAll(async () => {
  // The SQS client warns that a queue URL on another host than its endpoint is used as the endpoint.
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
  silent = await startSilentServer();
  unaccepting = await startUnacceptingListener();
  stallingBody = await startStallingBodyServer();
  endpoints.push(silent, unaccepting, stallingBody);
});

afterAll(async () => {
  for (const e of endpoints) await e.close();
  vi.restoreAllMocks();
});

async function expectTransientWithin(call: Promise<unknown>): Promise<TransientStoreError> {
  const outcome = await settleWithin(call, 20_000);
  expect(outcome.settled).toBe("rejected");
  const error = (outcome as { error: unknown }).error;
  expect(error).toBeInstanceOf(TransientStoreError);
  return error as TransientStoreError;
}

describe("the S3 request timeout", () => {
  it("fails a delete sent to an endpoint that never answers, as a retryable error", async () => {
    const store = storeAt(silent.port);
    try {
      const error = await expectTransientWithin(store.delete("soak/v4/t/p/b/payloads/x.json"));
      expect(error.message).toMatch(/TimeoutError/);
    } finally {
      await store.close();
    }
  });

  it("fails a conditional create and a head the same way", async () => {
    const store = storeAt(silent.port);
    try {
      await expectTransientWithin(store.createIfAbsent("a/b.json", new Uint8Array([1, 2, 3])));
      await expectTransientWithin(store.head("a/b.json"));
    } finally {
      await store.close();
    }
  });

  it("fails a get whose response body stops arriving", async () => {
    const store = storeAt(stallingBody.port);
    try {
      await expectTransientWithin(store.get("a/b.json"));
    } finally {
      await store.close();
    }
  });

  it("without a request timeout the same delete is still waiting at the deadline (what the timeout prevents)", async () => {
    const store = storeAt(silent.port, { connectTimeoutMs: 1000, requestTimeoutMs: 0 });
    try {
      expect((await settleWithin(store.delete("a/b.json"), 3000)).settled).toBe("deadline");
    } finally {
      await store.close();
    }
  });
});

describe("the S3 connect timeout", () => {
  it("fails a request whose connection is never accepted, as a retryable error", async () => {
    const store = storeAt(unaccepting.port, httpTimeoutsFromSeconds(1, 0));
    try {
      const error = await expectTransientWithin(store.head("a/b.json"));
      expect(error.message).toMatch(/TimeoutError/);
    } finally {
      await store.close();
    }
  });
});

describe("the SQS timeouts", () => {
  it("fail a send to a queue endpoint that never answers or never accepts", async () => {
    for (const [port, timeouts] of [
      [silent.port, { connectTimeoutMs: 1000, requestTimeoutMs: 1000 }],
      [unaccepting.port, { connectTimeoutMs: 1000, requestTimeoutMs: 0 }],
    ] as const) {
      const client = createSqsClient({ region: "us-east-1", timeouts });
      client.config.credentials = async () => credentials;
      const queue = new SqsWorkQueue(`http://127.0.0.1:${port}/000000000000/work`, client, {
        attempts: 1,
      });
      try {
        await expectTransientWithin(queue.send(item));
        await expectTransientWithin(queue.sendBatch([item]));
      } finally {
        client.destroy();
      }
    }
  });
});

describe("the runtimes built from the configuration", () => {
  let database: { url: string; drop(): Promise<void> };

  beforeAll(async () => {
    database = await freshDatabase(inject("databaseUrl"));
    vi.stubEnv("AWS_ACCESS_KEY_ID", credentials.accessKeyId);
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", credentials.secretAccessKey);
  });

  afterAll(async () => {
    vi.unstubAllEnvs();
    await database.drop();
  });

  it("`pulpitum` commands get an S3 client bounded by PULPITUM_S3_*_TIMEOUT_SECONDS", async () => {
    const config = parseConfig(
      {
        DATABASE_URL: database.url,
        PULPITUM_ARCHIVE_URL: "s3://stalled/archive",
        AWS_ENDPOINT_URL: `http://127.0.0.1:${silent.port}`,
        PULPITUM_S3_CONNECT_TIMEOUT_SECONDS: "1",
        PULPITUM_S3_REQUEST_TIMEOUT_SECONDS: "1",
      },
      { cwd: process.cwd() },
    );
    const runtime = await openAdapters(config, { migrate: true });
    try {
      await expectTransientWithin(runtime.objectStore.head("archive/v4/x"));
    } finally {
      await runtime.close();
    }
  });

  it("the Lambda functions get S3 and SQS clients bounded by the same variables", async () => {
    const runtime = await openLambdaAdapters({
      AWS_REGION: "us-east-1",
      DATABASE_URL: database.url,
      PULPITUM_ARCHIVE_URL: "s3://stalled/archive",
      AWS_ENDPOINT_URL: `http://127.0.0.1:${silent.port}`,
      PULPITUM_WORK_QUEUE_URL: `http://127.0.0.1:${unaccepting.port}/000000000000/work`,
      PULPITUM_S3_CONNECT_TIMEOUT_SECONDS: "1",
      PULPITUM_S3_REQUEST_TIMEOUT_SECONDS: "1",
      PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS: "1",
    });
    try {
      await expectTransientWithin(runtime.adapters.objectStore.head("archive/v4/x"));
      await expectTransientWithin(runtime.queue.send(item));
    } finally {
      await runtime.close();
    }
  });
});
