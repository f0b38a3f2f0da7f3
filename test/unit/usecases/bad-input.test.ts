/**
 * The bad-input suite: every malformed input from outside (queue messages,
 * Lambda events, CLI-level arguments, configuration, import lines, cursors,
 * archive objects) is answered by a typed error that names the input and
 * what would have been accepted, and nothing is lost or published: after
 * each case the hot rows, the bucket states and the archive objects are
 * exactly as before.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import {
  buildManifest,
  serializeManifest,
  validateManifest,
} from "../../../src/archive/manifest.js";
import { verifyArchive } from "../../../src/archive/verify.js";
import { parseConfig } from "../../../src/config/config.js";
import { parseBucketKey, type BucketId } from "../../../src/domain/bucket.js";
import { MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES } from "../../../src/domain/limits.js";
import { payloadKey } from "../../../src/domain/object-keys.js";
import { recordFromJsonLine, type TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { PulpitumError } from "../../../src/errors.js";
import {
  ArchiveIntegrityError,
  ConfigError,
  InvalidInputError,
  UnknownBucketError,
  UnknownTableError,
} from "../../../src/errors.js";
import { DurableTable, encodeCursor } from "../../../src/read/durable-table.js";
import { decodeWorkMessage } from "../../../src/ports/work-queue.js";
import { parseGcRequest } from "../../../functions/gc.js";
import { parseManualRunRequest } from "../../../src/usecases/manual-run.js";
import { parseReplayRequest } from "../../../src/usecases/replay-dlq.js";
import { parseRestoreRequest, restoreBucket } from "../../../src/usecases/restore.js";
import { processWorkMessage } from "../../../src/usecases/work-message.js";
import { validateDiscoveryEvent } from "../../../functions/discover.js";
import { classifyWorkerEvent } from "../../../functions/worker.js";
import {
  chatRecords,
  converge,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { onlyPart } from "../../support/one-part.js";

const TABLE = parseTableId("chat");
const text = (s: string) => new TextEncoder().encode(s);
const body = (fields: Record<string, unknown>) =>
  JSON.stringify({
    v: 1,
    table_id: "chat",
    partition_key_b64: "c29sbw==",
    bucket_key: "month:2025-03",
    ...fields,
  });
const line = (fields: Record<string, unknown>) =>
  JSON.stringify({
    partition_key: "c29sbw==",
    event_time: "2026-02-01T00:00:00Z",
    sort_key: "AA==",
    value: "AA==",
    ...fields,
  });

type ErrorClass = abstract new (...args: never[]) => PulpitumError;

interface BadInput {
  readonly name: string;
  readonly run: (w: World) => unknown;
  readonly error: ErrorClass;
  /** The message names the input and what is accepted. */
  readonly message: RegExp;
}

interface World {
  readonly h: Harness;
  readonly archived: BucketId;
  readonly hot: BucketId;
  readonly record: TableRecord;
}

/** A copy of the archive to corrupt, so the real one stays untouched. */
async function scratchCopy(w: World): Promise<MemoryObjectStore> {
  const copy = new MemoryObjectStore();
  for (const key of w.h.objects.keys()) await copy.createIfAbsent(key, await w.h.objects.get(key));
  return copy;
}

async function corruptedPayload(w: World, mutate: (bytes: Uint8Array) => Uint8Array) {
  const m = (await w.h.inner.getBucket(w.archived))!;
  const payload = await onlyPart(w.h.inner, w.archived);
  const copy = await scratchCopy(w);
  copy.tamper(payload.key, mutate(await copy.get(payload.key)));
  return await verifyArchive(copy, m.manifestKey!, {
    bucket: w.archived,
    parts: [payload],
  });
}

const config = (env: Record<string, string>) => parseConfig(env, { cwd: "/srv" });

const cases: BadInput[] = [
  // ---- malformed SQS bodies and worker events ----
  {
    name: "a worker event that is not an object",
    run: () => classifyWorkerEvent("archive please"),
    error: InvalidInputError,
    message: /^worker event: is not a JSON object; expected an SQS event/,
  },
  {
    name: "a worker event with an empty Records array",
    run: () => classifyWorkerEvent({ Records: [] }),
    error: InvalidInputError,
    message: /worker event: Records is not a non-empty array; expected an SQS event/,
  },
  {
    name: "an SQS record that is not from SQS",
    run: () => classifyWorkerEvent({ Records: [{ eventSource: "aws:s3", messageId: "m" }] }),
    error: InvalidInputError,
    message: /Records\[0\] is not an SQS record with a messageId/,
  },
  {
    name: "an SQS body that is not JSON",
    run: () => decodeWorkMessage("{table_id: chat", "SQS message m-1"),
    error: InvalidInputError,
    message: /^SQS message m-1: body is not JSON; expected \{"v":1,"table_id":string/,
  },
  {
    name: "an SQS body of another message version",
    run: () => decodeWorkMessage(body({ v: 2 }), "SQS message m-2"),
    error: InvalidInputError,
    message: /SQS message m-2: has version 2; expected \{"v":1/,
  },
  {
    name: "an SQS body with an unknown field",
    run: () => decodeWorkMessage(body({ phase: "cleanup" }), "SQS message m-3"),
    error: InvalidInputError,
    message: /has unknown field "phase"; expected/,
  },
  {
    name: "an SQS body whose table_id is a number",
    run: () => decodeWorkMessage(body({ table_id: 7 }), "SQS message m-4"),
    error: InvalidInputError,
    message: /table_id is not a string; expected/,
  },
  {
    name: "an SQS body whose partition key is base64url, not standard base64",
    run: () => decodeWorkMessage(body({ partition_key_b64: "c29sbw" }), "SQS message m-5"),
    error: InvalidInputError,
    message: /partition_key_b64 is not standard base64; expected/,
  },
  {
    name: "an SQS body naming month 13",
    run: () => decodeWorkMessage(body({ bucket_key: "month:2025-13" }), "SQS message m-6"),
    error: InvalidInputError,
    message: /bucket_key "month:2025-13" is not a canonical bucket key; expected .*"month:YYYY-MM"/,
  },
  {
    name: "a well-formed message for a bucket nothing was ever appended to",
    run: (w) =>
      processWorkMessage(
        { ...w.h.process().ctx, queue: new InProcessWorkQueue() },
        decodeWorkMessage(body({ partition_key_b64: "bm9ib2R5" })),
      ),
    error: UnknownBucketError,
    message: /no bucket metadata for chat\/nobody\/month:2025-03: nothing was ever appended to it/,
  },
  // ---- wrong types in manual, restore, GC, discovery and replay events ----
  {
    name: "a manual run whose max_phases is a string",
    run: () => parseManualRunRequest(JSON.parse(body({ max_phases: "3" }))),
    error: InvalidInputError,
    message: /max_phases "3" is not an integer from 1 to 100; expected .*"max_phases"/,
  },
  {
    name: "a manual run with an upper-case table id",
    run: () => parseManualRunRequest(JSON.parse(body({ table_id: "Chat" }))),
    error: InvalidInputError,
    message: /table_id "Chat": is not a valid table id; expected 1-63 characters of lowercase/,
  },
  {
    name: "a restore event with a negative hold",
    run: () => parseRestoreRequest(JSON.parse(body({ hold_seconds: -1 }))),
    error: InvalidInputError,
    message: /hold_seconds -1 is not an integer from 0 to \d+; expected .*"hold_seconds"/,
  },
  {
    name: "a restore event without a bucket key",
    run: () => parseRestoreRequest({ v: 1, table_id: "chat", partition_key_b64: "c29sbw==" }),
    error: InvalidInputError,
    message: /restore request: bucket_key undefined is not a canonical bucket key; expected/,
  },
  {
    name: "a GC event whose dry_run is a string",
    run: () => parseGcRequest({ dry_run: "yes" }),
    error: InvalidInputError,
    message: /GC request: dry_run "yes" is not true or false; expected \{\} or an EventBridge/,
  },
  {
    name: "a GC event with an unknown field",
    run: () => parseGcRequest({ min_age: 10 }),
    error: InvalidInputError,
    message: /has unknown field "min_age"; expected/,
  },
  {
    name: "a discovery event from another source",
    run: () => validateDiscoveryEvent({ source: "aws.s3", "detail-type": "Object Created" }),
    error: InvalidInputError,
    message: /discovery event: has source "aws.s3".*; expected an EventBridge scheduled event/,
  },
  {
    name: "a DLQ replay request for zero messages",
    run: () => parseReplayRequest({ max_messages: 0 }),
    error: InvalidInputError,
    message: /max_messages 0 is not an integer from 1 to/,
  },
  {
    name: "a DLQ replay request with a misspelled field",
    run: () => parseReplayRequest({ max_message: 10 }),
    error: InvalidInputError,
    message: /has unknown field "max_message"; expected/,
  },
  {
    name: "a DLQ replay request whose dry_run is a string",
    run: () => parseReplayRequest({ dry_run: "false" }),
    error: InvalidInputError,
    message: /dry_run "false" is not true or false; expected/,
  },
  // ---- unknown tables and buckets, invalid bucket keys ----
  {
    name: "an append to an unregistered table",
    run: (w) => w.h.inner.append(parseTableId("chats"), [w.record], w.h.clock.now()),
    error: UnknownTableError,
    message: /table "chats" is not registered; create it with `pulpitum tables create chats/,
  },
  {
    name: "a read of an unregistered table",
    run: (w) =>
      new DurableTable({ hotStore: w.h.inner, objectStore: w.h.objects, clock: w.h.clock }).read(
        parseTableId("nope"),
        text("solo"),
      ),
    error: UnknownTableError,
    message: /table "nope" is not registered/,
  },
  {
    name: "a restore of a bucket that does not exist",
    run: (w) =>
      restoreBucket(
        w.h.process().ctx,
        { ...w.archived, bucketKey: "month:2019-01" },
        { holdMs: 0 },
      ),
    error: UnknownBucketError,
    message: /no bucket metadata for chat\/solo\/month:2019-01/,
  },
  {
    name: "a bucket key for February 29 of a common year",
    run: () => parseBucketKey("day:2023-02-29"),
    error: InvalidInputError,
    message: /bucket key "day:2023-02-29": .*; expected/,
  },
  {
    name: "a bucket key with a two-digit year",
    run: () => parseBucketKey("year:24"),
    error: InvalidInputError,
    message: /bucket key "year:24".*expected .*year:YYYY/,
  },
  // ---- bad configuration values ----
  {
    name: "a lease renewal as long as the lease",
    run: () => config({ ARCHIVER_LEASE_SECONDS: "30", ARCHIVER_LEASE_RENEWAL_SECONDS: "30" }),
    error: ConfigError,
    message:
      /ARCHIVER_LEASE_RENEWAL_SECONDS="30" is invalid: .*shorter than ARCHIVER_LEASE_SECONDS \(30\)/,
  },
  {
    name: "a database URL without an archive URL",
    run: () => config({ DATABASE_URL: "postgresql://u@db/app" }),
    error: ConfigError,
    message: /PULPITUM_ARCHIVE_URL: is unset while DATABASE_URL is set: set both/,
  },
  {
    name: "a GC safety age of one minute",
    run: () => config({ ARCHIVER_GC_MIN_AGE_SECONDS: "60" }),
    error: ConfigError,
    message: /ARCHIVER_GC_MIN_AGE_SECONDS="60" is invalid: an integer from 3600 to 31536000/,
  },
  {
    name: "an archive prefix that climbs out with '..'",
    run: () =>
      config({ DATABASE_URL: "postgresql://u@db/app", PULPITUM_ARCHIVE_URL: "s3://arch/a/../b" }),
    error: ConfigError,
    message: /PULPITUM_ARCHIVE_URL="s3:\/\/arch\/a\/..\/b" is invalid: .*may not contain '.', '..'/,
  },
  {
    name: "a cleanup rate cap that is not an integer",
    run: () => config({ ARCHIVER_CLEANUP_MAX_ROWS_PER_SECOND: "fast" }),
    error: ConfigError,
    message: /ARCHIVER_CLEANUP_MAX_ROWS_PER_SECOND="fast" is invalid: an integer from 0 to/,
  },
  // ---- corrupt or truncated payloads, a manifest pointing elsewhere ----
  {
    name: "a payload with one flipped byte",
    run: (w) =>
      corruptedPayload(w, (b) => {
        const c = new Uint8Array(b);
        c[c.length >> 1]! ^= 0x01;
        return c;
      }),
    error: ArchiveIntegrityError,
    message:
      /archive object .*\/payloads\/.* failed verification: payload hashes to [0-9a-f]{64}, [0-9a-f]{64} in manifest/,
  },
  {
    name: "a truncated payload",
    run: (w) => corruptedPayload(w, (b) => b.slice(0, b.length - 10)),
    error: ArchiveIntegrityError,
    message: /failed verification: payload is \d+ bytes, \d+ in manifest/,
  },
  {
    name: "a manifest whose payload_key points at another bucket's payload",
    run: async (w) => {
      const m = await onlyPart(w.h.inner, w.archived);
      const other = payloadKey(
        { prefix: "archive", ...w.archived, bucketKey: "month:2025-04" },
        m.sha256,
        "json",
      );
      const d = parseBucketKey(w.archived.bucketKey);
      const manifest = buildManifest({
        bucket: { ...w.archived, strategy: d.strategy, start: d.start, end: d.end },
        generation: 1,
        format: "json",
        payload: { ...m, key: other },
      });
      return validateManifest(serializeManifest(manifest), {
        prefix: "archive",
        bucket: w.archived,
      });
    },
    error: ArchiveIntegrityError,
    message:
      /manifest field payload_key is ".*month:2025-04\/payloads\/.*", expected archive\/v4\/chat\/c29sbw\/month:2025-03\/payloads\//,
  },
  {
    name: "a manifest that is not JSON",
    run: () => validateManifest(text("manifest_version: 4"), {}, "archive/v4/m.json"),
    error: ArchiveIntegrityError,
    message: /archive object archive\/v4\/m.json failed verification: manifest is not JSON/,
  },
  // ---- oversized keys ----
  {
    name: "a partition key one byte over the limit",
    run: (w) =>
      w.h.inner.append(
        TABLE,
        [w.record, { ...w.record, partitionKey: new Uint8Array(MAX_PARTITION_KEY_BYTES + 1) }],
        w.h.clock.now(),
      ),
    error: InvalidInputError,
    message:
      /record 1 of the append to table chat: its partition_key is 1025 bytes long; expected a partition_key of at most 1024 bytes; nothing of this append was stored/,
  },
  {
    name: "a sort key one byte over the limit",
    run: (w) =>
      w.h.inner.append(
        TABLE,
        [{ ...w.record, sortKey: new Uint8Array(MAX_SORT_KEY_BYTES + 1) }],
        w.h.clock.now(),
      ),
    error: InvalidInputError,
    message: /its sort_key is 1025 bytes long; expected a sort_key of at most 1024 bytes/,
  },
  // ---- keys with path tricks ----
  {
    name: "an object key climbing out of the archive",
    run: (w) => w.h.objects.get("archive/../../etc/passwd"),
    error: InvalidInputError,
    message:
      /object key "archive\/..\/..\/etc\/passwd": contains a '.' or '..' segment; expected a relative/,
  },
  {
    name: "an absolute object key",
    run: (w) => w.h.objects.delete("/archive/v4/chat"),
    error: InvalidInputError,
    message: /object key "\/archive\/v4\/chat": is absolute; expected a relative/,
  },
  {
    name: "a table id that is a relative path",
    run: () => parseTableId("../chat", "TABLE"),
    error: InvalidInputError,
    message: /TABLE "..\/chat": is not a valid table id; expected 1-63 characters/,
  },
  // ---- import lines ----
  {
    name: "an import line with sub-microsecond digits",
    run: () => recordFromJsonLine(line({ event_time: "2026-02-01T00:00:00.123456789Z" }), "line 7"),
    error: InvalidInputError,
    message:
      /line 7 event_time "2026-02-01T00:00:00.123456789Z": has sub-microsecond digits.*; expected/,
  },
  {
    name: "an import line that is not JSON",
    run: () => recordFromJsonLine("{partition_key:", "line 8"),
    error: InvalidInputError,
    message: /^line 8: is not valid JSON; expected \{"partition_key": base64/,
  },
  {
    name: "an import line with an unknown field",
    run: () => recordFromJsonLine(line({ timestamp: 1 }), "line 9"),
    error: InvalidInputError,
    message: /line 9: has unknown field "timestamp"; expected/,
  },
  {
    name: "an import line whose value is not base64",
    run: () => recordFromJsonLine(line({ value: "not base64!" }), "line 10"),
    error: InvalidInputError,
    message:
      /line 10 value: "not base64!" is not standard base64; expected a standard base64 string/,
  },
  // ---- bad cursors ----
  {
    name: "a cursor that is not a Pulpitum cursor",
    run: (w) =>
      new DurableTable({ hotStore: w.h.inner, objectStore: w.h.objects, clock: w.h.clock }).read(
        TABLE,
        text("solo"),
        { cursor: "bm90IGEgY3Vyc29y" },
      ),
    error: InvalidInputError,
    message: /cursor "bm90IGEgY3Vyc29y": is not a Pulpitum cursor; expected a next_cursor value/,
  },
  {
    name: "a cursor from another partition",
    run: (w) =>
      new DurableTable({ hotStore: w.h.inner, objectStore: w.h.objects, clock: w.h.clock }).read(
        TABLE,
        text("solo"),
        { cursor: encodeCursor(TABLE, text("other"), w.record) },
      ),
    error: InvalidInputError,
    message: /cursor: belongs to another table or partition; expected a next_cursor value/,
  },
];

/** Everything a case could have damaged: hot rows, bucket state, archive objects. */
async function fingerprint(w: World): Promise<unknown> {
  const buckets = [];
  for (const id of [w.archived, w.hot]) {
    const m = (await w.h.inner.getBucket(id))!;
    buckets.push({
      state: m.state,
      phase: m.phase,
      hotDeleted: m.hotDeleted,
      exported: m.exported,
      parts: await w.h.inner.listParts(id),
      manifestKey: m.manifestKey,
      restoreStartedAt: m.restoreStartedAt,
      owner: m.ownerToken,
      hotRows: await w.h.inner.countHotRows(id),
    });
  }
  const objects: Record<string, string> = {};
  for (const key of w.h.objects.keys()) {
    objects[key] = Buffer.from(await w.h.objects.get(key)).toString("base64");
  }
  return { buckets, objects, tables: await w.h.inner.listTables() };
}

describe("the bad-input suite", () => {
  let w: World;
  beforeAll(async () => {
    const h = await makeHarness();
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "json",
      chatRecords([3], 40, ["solo"]),
    );
    await converge(h, expected);
    const record: TableRecord = {
      partitionKey: text("solo"),
      eventTime: BigInt(Date.parse("2026-02-01T00:00:00Z")) * 1000n,
      sortKey: new Uint8Array([1]),
      value: text("hot"),
    };
    await h.inner.append(TABLE, [record], h.clock.now());
    w = {
      h,
      record,
      archived: [...expected.values()][0]!.id,
      hot: { tableId: TABLE, partitionKey: text("solo"), bucketKey: "month:2026-02" },
    };
    expect(await h.inner.getBucket(w.archived)).toMatchObject({ state: "archived" });
    expect(await h.inner.getBucket(w.hot)).toMatchObject({ state: "hot" });
  }, 120_000);
  afterAll(async () => {
    console.log(`bad-input suite: ${cases.length} cases`);
    await w.h.close();
  });

  it(`counts at least 30 cases (${cases.length})`, () => {
    expect(cases.length).toBeGreaterThanOrEqual(30);
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
  });

  it.each(cases.map((c) => [c.name, c] as const))(
    "%s is refused with a typed error naming the input and the accepted form, losing and publishing nothing",
    async (_name, c) => {
      const before = await fingerprint(w);
      const error = await (async () => {
        try {
          await c.run(w);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error, "an error was raised").toBeInstanceOf(c.error);
      expect((error as Error).message).toMatch(c.message);
      if (error instanceof InvalidInputError) {
        expect(error.accepted.length).toBeGreaterThan(0);
        expect(error.message).toContain(`expected ${error.accepted}`);
      }
      expect(await fingerprint(w)).toEqual(before);
    },
  );
});
