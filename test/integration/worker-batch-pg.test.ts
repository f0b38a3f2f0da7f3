/**
 * The worker handler against its own deadline and against held buckets, on
 * PostgreSQL and the emulator's SQS and S3: messages are received from a real
 * queue (with a dead-letter queue behind it) and handed to the real handler
 * as the event source mapping would.
 *
 * - No record of a batch starts once the invocation's deadline has passed;
 *   the records not started come back for another invocation, those that ran
 *   report their own outcome.
 * - A message for a bucket held past SQS's visibility cap (a restore's hold of
 *   7 days) is finished, not redelivered until it dead-letters; discovery
 *   offers the bucket again once its hold has passed. One held for 60 s is
 *   handed back for 60 s.
 */
import { randomUUID } from "node:crypto";
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createDiscoveryHandler } from "../../functions/discover.js";
import type { LambdaAdapters } from "../../functions/open-adapters.js";
import { createRestoreHandler } from "../../functions/restore.js";
import { WORKER_DEADLINE_MARGIN_MS, createWorkerHandler } from "../../functions/worker.js";
import type { BucketId } from "../../src/domain/bucket.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseTableId, type TableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { ManualClock } from "../../src/ports/clock.js";
import type { RestoreReport } from "../../src/usecases/restore.js";
import { encodeWorkMessage, type WorkQueue } from "../../src/ports/work-queue.js";
import { deliverToWorker, invocationContext } from "../support/lambda-invocation.js";
import { openLambdaWorld, type LambdaWorld } from "../support/lambda-world.js";

vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = "WARN";
});

/** The work queues' visibility timeout: a message reported failed and not handed back returns after it. */
const VISIBILITY_SECONDS = 2;
const MAX_RECEIVE_COUNT = 3;
const SEVEN_DAYS_SECONDS = 604_800;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function bucketOf(tableId: TableId, tenant: string): BucketId {
  return { tableId, partitionKey: new TextEncoder().encode(tenant), bucketKey: "month:2025-03" };
}

function records(bucket: BucketId): TableRecord[] {
  const base = parseRfc3339Micros("2025-03-02T00:00:00Z");
  return Array.from({ length: 20 }, (_, i) => ({
    partitionKey: bucket.partitionKey,
    eventTime: base + BigInt(i) * 3_600_000_000n,
    sortKey: new Uint8Array([i]),
    value: new TextEncoder().encode(`event ${i}`),
  }));
}

describe("the worker handler on PostgreSQL and SQS", () => {
  const clock = new ManualClock("2026-06-01T00:00:00Z");
  /** The visibility of every ChangeMessageVisibility call the worker made, by queue URL. */
  const visibilityChanges = new Map<string, number[]>();
  /** SendMessage and SendMessageBatch calls made; while `refuseSendBatches`, each batch fails. */
  let sendSingles = 0;
  let sendBatches = 0;
  let refuseSendBatches = false;
  let world: LambdaWorld;
  let inspector: LambdaAdapters;

  beforeAll(async () => {
    world = await openLambdaWorld({
      name: "worker-batch",
      env: { ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z", ARCHIVER_REQUEUE_SECONDS: "0" },
      // Each fleet has its own queues (openFleet).
      queue: false,
      clock,
      // The manual clock plays the functions' time, months behind the database's.
      clockCheck: false,
    });
    world.sqs.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === "SendMessageCommand") sendSingles++;
        if (context.commandName === "SendMessageBatchCommand") {
          sendBatches++;
          if (refuseSendBatches) throw new Error("ServiceUnavailable: injected by the test");
        }
        if (context.commandName === "ChangeMessageVisibilityCommand") {
          const input = args.input as { QueueUrl: string; VisibilityTimeout: number };
          const seen = visibilityChanges.get(input.QueueUrl) ?? [];
          seen.push(input.VisibilityTimeout);
          visibilityChanges.set(input.QueueUrl, seen);
        }
        return await next(args);
      },
      { step: "initialize", name: "recordVisibilityChanges" },
    );
    inspector = await world.open({
      env: { PULPITUM_WORK_QUEUE_URL: "http://unused" },
      migrate: true,
    });
  }, 120_000);

  afterAll(() => world?.close());

  /** A table of `n` eligible buckets, one per tenant, each holding 20 records. */
  async function seedBuckets(name: string, n: number): Promise<BucketId[]> {
    const tableId = parseTableId(name);
    const store = inspector.adapters.hotStore;
    await store.registerTable(
      { tableId, strategy: "CalendarMonthUtc", format: "parquet", writableBuckets: null },
      clock.now(),
    );
    const buckets = Array.from({ length: n }, (_, i) => bucketOf(tableId, `tenant-${i}`));
    for (const b of buckets) await store.append(tableId, records(b), clock.now());
    return buckets;
  }

  /**
   * A work queue with a dead-letter queue after MAX_RECEIVE_COUNT receives,
   * and a worker, a restore and a discovery function on it. `afterClaim`
   * runs when a claim has committed, inside its phase: a test moves the clock
   * there to make the phase slow.
   */
  async function openFleet(
    afterClaim: () => void = () => {},
    options: {
      readonly recordsAtOnce?: number;
      /** Each claim waits (at most 5 s) until this many claims have been in flight together. */
      readonly gatherClaims?: number;
    } = {},
  ) {
    /** Claims in flight now, and the most ever in flight together. */
    const claims = { now: 0, most: 0 };
    const name = `pulpitum-batch-${randomUUID().slice(0, 8)}`;
    const dlqUrl = (await world.sqs.send(new CreateQueueCommand({ QueueName: `${name}-dlq` })))
      .QueueUrl!;
    const dlqArn = (
      await world.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ["QueueArn"] }),
      )
    ).Attributes!.QueueArn!;
    const queueUrl = (
      await world.sqs.send(
        new CreateQueueCommand({
          QueueName: name,
          Attributes: {
            VisibilityTimeout: String(VISIBILITY_SECONDS),
            RedrivePolicy: JSON.stringify({
              deadLetterTargetArn: dlqArn,
              maxReceiveCount: MAX_RECEIVE_COUNT,
            }),
          },
        }),
      )
    ).QueueUrl!;
    const container = () => world.container({ env: { PULPITUM_WORK_QUEUE_URL: queueUrl } });
    const workerContainer = container();
    const worker = createWorkerHandler(async () => {
      const { adapters, queue } = await workerContainer();
      const observed: WorkQueue & Pick<typeof queue, "returnAfter"> = {
        send: (item) => queue.send(item),
        sendBatch: (items) => queue.sendBatch(items),
        depth: () => queue.depth(),
        returnAfter: (receipt, seconds) => queue.returnAfter(receipt, seconds),
      };
      const context: typeof adapters.context = (log) => {
        const ctx = adapters.context(log);
        const hotStore = new Proxy(ctx.hotStore, {
          get(target, prop, receiver) {
            if (prop === "claim")
              return async (...args: Parameters<typeof target.claim>) => {
                claims.most = Math.max(claims.most, ++claims.now);
                try {
                  const until = Date.now() + 5_000;
                  while (claims.most < (options.gatherClaims ?? 0) && Date.now() < until)
                    await sleep(10);
                  const claimed = await target.claim(...args);
                  afterClaim();
                  return claimed;
                } finally {
                  claims.now--;
                }
              };
            const value = Reflect.get(target, prop, receiver) as unknown;
            return typeof value === "function" ? (value as () => unknown).bind(target) : value;
          },
        });
        return { ...ctx, hotStore };
      };
      return {
        adapters: { ...adapters, context },
        queue: observed,
        recordsAtOnce: options.recordsAtOnce,
      };
    });
    return {
      queueUrl,
      dlqUrl,
      worker,
      restore: createRestoreHandler(container()),
      discovery: createDiscoveryHandler(container()),
      deliver: (remainingMs: () => number = () => 300_000) =>
        deliverToWorker(world.sqs, queueUrl, worker, () =>
          invocationContext("worker-batch", remainingMs),
        ),
      send: (bucket: BucketId) =>
        world.sqs.send(
          new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: encodeWorkMessage(bucket) }),
        ),
      visibilityChanges: () => visibilityChanges.get(queueUrl) ?? [],
      mostClaimsAtOnce: () => claims.most,
    };
  }

  /** Messages visible and in flight on a queue (moto's counters are exact). */
  async function counts(url: string): Promise<{ visible: number; inFlight: number }> {
    const r = await world.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
      }),
    );
    return {
      visible: Number(r.Attributes!.ApproximateNumberOfMessages),
      inFlight: Number(r.Attributes!.ApproximateNumberOfMessagesNotVisible),
    };
  }

  /** The bucket's fields a started phase would change. */
  async function untouched(bucket: BucketId) {
    const m = await inspector.adapters.hotStore.getBucket(bucket);
    return {
      state: m?.state,
      ownerToken: m?.ownerToken,
      attempts: m?.attempts,
      generation: m?.generation,
    };
  }

  describe("handing on", () => {
    it("hands a batch's next phases on with SendMessageBatch, never one message at a time; when SQS refuses it, the batch's records come back and finish their buckets", async () => {
      // Prepare
      const buckets = await seedBuckets("hand_on", 5);
      const fleet = await openFleet();
      for (const b of buckets) await fleet.send(b);

      // Act: every claim commits, and the export messages cannot be sent
      refuseSendBatches = true;
      const refused = await fleet.deliver();
      refuseSendBatches = false;

      // Assess: all five records stay on the queue, their buckets claimed
      expect(refused.delivered).toBe(5);
      expect([...refused.failedIds].sort()).toEqual([...refused.messageIds].sort());
      for (const b of buckets) {
        expect(await inspector.adapters.hotStore.getBucket(b)).toMatchObject({
          state: "archiving",
          phase: "export",
        });
      }

      // Act: the records come back after their visibility timeout and run the next phases themselves
      sendBatches = 0;
      sendSingles = 0;
      let deliveries = 0;
      const finished = async () =>
        (await Promise.all(buckets.map((b) => inspector.adapters.hotStore.getBucket(b)))).every(
          (m) => m?.state === "archived" && m.hotDeleted,
        );
      while (!(await finished())) {
        expect(++deliveries).toBeLessThanOrEqual(40);
        const delivery = await fleet.deliver();
        if (delivery.delivered === 0) await sleep(500);
      }

      // Assess: each bucket whole, every later phase handed on in batch calls, never one at a time
      for (const b of buckets) {
        expect(await inspector.adapters.hotStore.getBucket(b)).toMatchObject({
          state: "archived",
          hotDeleted: true,
          exported: { parts: 1, rowCount: 20 },
        });
      }
      expect(sendSingles).toBe(0);
      expect(sendBatches).toBeGreaterThanOrEqual(3);
      expect(await counts(fleet.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
      expect(await counts(fleet.dlqUrl)).toEqual({ visible: 0, inFlight: 0 });
    });
  });

  describe("against its deadline", () => {
    it("starts no phase of a batch of five received with less time left than its margin, and reports all five for another invocation", async () => {
      // Prepare
      const buckets = await seedBuckets("late_batch", 5);
      const before = await Promise.all(buckets.map(untouched));
      const fleet = await openFleet();
      for (const b of buckets) await fleet.send(b);

      // Act: 5 s left, half the worker's margin
      const late = await fleet.deliver(() => WORKER_DEADLINE_MARGIN_MS / 2);

      // Assess: nothing ran, every record came back at once
      expect(late.delivered).toBe(5);
      expect([...late.failedIds].sort()).toEqual([...late.messageIds].sort());
      expect(await Promise.all(buckets.map(untouched))).toEqual(before);
      expect(before.every((m) => m.state === "hot" && m.ownerToken === null)).toBe(true);
      expect(fleet.visibilityChanges()).toEqual([0, 0, 0, 0, 0]);

      // Act: the next invocation, with its whole budget, claims all five
      const next = await fleet.deliver();
      expect(next).toMatchObject({ delivered: 5, failures: 0 });
      for (const b of buckets) {
        expect(await inspector.adapters.hotStore.getBucket(b)).toMatchObject({
          state: "archiving",
          attempts: 0,
        });
      }
    });

    it("runs a batch's records at once, each bucket's phase beside the others'", async () => {
      // Prepare
      const buckets = await seedBuckets("at_once", 5);
      const fleet = await openFleet(() => {}, { gatherClaims: 5 });
      for (const b of buckets) await fleet.send(b);

      // Act
      const batch = await fleet.deliver();

      // Assess: all five claims were in flight together, and each committed
      expect(batch).toMatchObject({ delivered: 5, failures: 0 });
      expect(fleet.mostClaimsAtOnce()).toBe(5);
      for (const b of buckets) {
        expect(await inspector.adapters.hotStore.getBucket(b)).toMatchObject({
          state: "archiving",
          phase: "export",
          ownerToken: null,
        });
      }
    });

    it("runs two messages for one bucket in one batch one after the other: the second runs the next phase, neither is busy", async () => {
      // Prepare: a duplicate of the bucket's message beside it
      const [bucket] = await seedBuckets("duplicate_in_batch", 1);
      const fleet = await openFleet();
      await fleet.send(bucket!);
      await fleet.send(bucket!);

      // Act
      const batch = await fleet.deliver();

      // Assess: claimed, then exported by the second message; nothing came back
      expect(batch).toMatchObject({ delivered: 2, failures: 0 });
      expect(fleet.mostClaimsAtOnce()).toBe(1);
      expect(await inspector.adapters.hotStore.getBucket(bucket!)).toMatchObject({
        state: "archiving",
        phase: "seal",
        ownerToken: null,
      });
    });

    it("with one record at a time, runs exactly the first record of a batch whose deadline passes while that record runs, and reports only the four not started", async () => {
      // Prepare: the first phase takes 295 s of a 300 s budget; the others wait for its lane
      const buckets = await seedBuckets("slow_batch", 5);
      let budgetEnd = 0;
      const fleet = await openFleet(() => clock.advance(295_000), { recordsAtOnce: 1 });
      for (const b of buckets) await fleet.send(b);

      // Act
      budgetEnd = clock.now().getTime() + 300_000;
      const batch = await fleet.deliver(() => budgetEnd - clock.now().getTime());

      // Assess
      expect(batch.delivered).toBe(5);
      const [first, ...rest] = batch.messageIds;
      expect(batch.failedIds.has(first!)).toBe(false);
      expect([...batch.failedIds].sort()).toEqual([...rest].sort());
      const states = await Promise.all(
        buckets.map(async (b) => (await inspector.adapters.hotStore.getBucket(b))!),
      );
      const claimed = states.filter((m) => m.state === "archiving");
      expect(claimed).toHaveLength(1);
      expect(claimed[0]).toMatchObject({ phase: "export", ownerToken: null, attempts: 0 });
      expect(states.filter((m) => m.state === "hot" && m.ownerToken === null)).toHaveLength(4);
      // The four came back at once; the claimed bucket's export message was sent.
      expect(fleet.visibilityChanges()).toEqual([0, 0, 0, 0]);
      expect(await counts(fleet.queueUrl)).toEqual({ visible: 5, inFlight: 0 });
    });
  });

  /** Receive and delete everything a queue holds; the bodies received. */
  async function drainBodies(url: string): Promise<string[]> {
    const bodies: string[] = [];
    for (;;) {
      const r = await world.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
      );
      if (!r.Messages?.length) return bodies;
      for (const m of r.Messages) {
        bodies.push(m.Body!);
        await world.sqs.send(
          new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }),
        );
      }
    }
  }

  describe("a held bucket", () => {
    let weekHeld: BucketId;
    let minuteHeld: BucketId;

    beforeAll(async () => {
      const seeded = await seedBuckets("held", 2);
      weekHeld = seeded[0]!;
      minuteHeld = seeded[1]!;
      const setup = await openFleet();
      await setup.send(weekHeld);
      await setup.send(minuteHeld);
      for (let round = 0; round < 20; round++) {
        const { delivered, failures } = await setup.deliver();
        expect(failures).toBe(0);
        if (delivered === 0) break;
      }
      const context = invocationContext("restore");
      const event = (b: BucketId, hold: number) => ({
        ...(JSON.parse(encodeWorkMessage(b)) as object),
        hold_seconds: hold,
      });
      const reports = [
        (await setup.restore(event(weekHeld, SEVEN_DAYS_SECONDS), context)) as RestoreReport,
        (await setup.restore(event(minuteHeld, 60), context)) as RestoreReport,
      ];
      for (const r of reports) expect(r.result).toBe("restored");
    }, 120_000);

    it("for 60 s: its message is handed back for 60 s, not its visibility timeout", async () => {
      // Prepare
      const held = await inspector.adapters.hotStore.getBucket(minuteHeld);
      expect(held!.retryAt!.getTime()).toBe(clock.now().getTime() + 60_000);
      const fleet = await openFleet();
      await fleet.send(minuteHeld);

      // Act
      const delivery = await fleet.deliver();
      await sleep(VISIBILITY_SECONDS * 1000 + 500);

      // Assess: kept, hidden for the hold, past the queue's own visibility timeout
      expect(delivery).toMatchObject({ delivered: 1, failures: 1 });
      expect(fleet.visibilityChanges()).toEqual([60]);
      expect(await counts(fleet.queueUrl)).toEqual({ visible: 0, inFlight: 1 });
      expect(await inspector.adapters.hotStore.getBucket(minuteHeld)).toMatchObject({
        state: "hot",
        attempts: 0,
        ownerToken: null,
      });
    });

    it("for seven days: its message is finished, never redelivered nor dead-lettered, and discovery offers the bucket once the hold has passed", async () => {
      // Prepare
      const held = await inspector.adapters.hotStore.getBucket(weekHeld);
      expect(held).toMatchObject({ state: "hot", quarantinedAt: null });
      expect(held!.retryAt!.getTime()).toBe(clock.now().getTime() + SEVEN_DAYS_SECONDS * 1000);
      const fleet = await openFleet();
      await fleet.send(weekHeld);

      // Act: deliver for longer than the visibility timeout times the receive count
      const deliveries = [];
      for (let round = 0; round < MAX_RECEIVE_COUNT + 1; round++) {
        deliveries.push(await fleet.deliver());
        await sleep(VISIBILITY_SECONDS * 1000 + 200);
      }

      // Assess: received once, never again, never dead-lettered
      expect(deliveries.flatMap((d) => [...d.receiveCounts.values()])).toEqual([1]);
      expect(await counts(fleet.dlqUrl)).toEqual({ visible: 0, inFlight: 0 });
      expect(await counts(fleet.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
      expect(deliveries[0]).toMatchObject({ delivered: 1, failures: 0 });
      expect(fleet.visibilityChanges()).toEqual([]);
      expect(await inspector.adapters.hotStore.getBucket(weekHeld)).toMatchObject({
        state: "hot",
        attempts: 0,
        retryAt: held!.retryAt,
      });

      // Act: discovery during the hold and after it
      await fleet.discovery({}, invocationContext("discover"));
      const during = await drainBodies(fleet.queueUrl);
      clock.set(new Date(held!.retryAt!.getTime() + 1000));
      await fleet.discovery({}, invocationContext("discover"));
      const after = await drainBodies(fleet.queueUrl);

      // Assess
      expect(during).not.toContain(encodeWorkMessage(weekHeld));
      expect(after).toContain(encodeWorkMessage(weekHeld));
    }, 60_000);
  });
});
