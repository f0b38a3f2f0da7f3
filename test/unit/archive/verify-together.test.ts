/**
 * Publish's and cleanup's archive checks send the recorded parts' HEADs
 * with the manifest's GET (issue 52: a phase's independent requests go
 * together, one S3 latency instead of two), and still report what the
 * one-after-another checks reported: a missing or invalid manifest first,
 * then the first failing part in part order, with no request left running
 * once the call returns.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import { sealManifest, storePayload, type ArchiveBucketRef } from "../../../src/archive/store.js";
import { checkPublishedArchive, verifyArchive } from "../../../src/archive/verify.js";
import { parseBucketKey } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import { ArchiveIntegrityError, ObjectNotFoundError } from "../../../src/errors.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";
import { Gate } from "../../support/gates.js";

const PREFIX = "archive/verify";
// A partition key long and odd enough to be hashed into its object keys, with every byte value.
const REF: ArchiveBucketRef = {
  tableId: parseTableId("events"),
  partitionKey: Buffer.concat([
    Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
    Buffer.alloc(300, 0xff),
  ]),
  bucketKey: "day:2024-03-01",
};

let tempDir: string;
beforeEach(async () => {
  tempDir = await mkdtemp(path.join(os.tmpdir(), "verify-together-"));
});
afterEach(async () => {
  await rm(tempDir, { recursive: true, force: true });
});

function rows(): BucketRow[] {
  const start = parseRfc3339Micros("2024-03-01T00:00:00Z");
  return [
    { eventTime: start, sortKey: Buffer.alloc(0), value: Buffer.alloc(0) },
    { eventTime: start + 1n, sortKey: Buffer.from([0, 255]), value: Buffer.alloc(64 * 1024, 7) },
  ];
}

async function archived(store: MemoryObjectStore) {
  const payload = await storePayload({
    attempt: { generation: 1, ownerToken: "together" },
    store,
    prefix: PREFIX,
    bucket: REF,
    format: "parquet",
    rows: (async function* () {
      yield rows();
    })(),
    tempDir,
  });
  const d = parseBucketKey(REF.bucketKey);
  const manifestKey = await sealManifest({
    store,
    prefix: PREFIX,
    bucket: REF,
    strategy: d.strategy,
    start: d.start,
    end: d.end,
    generation: 1,
    format: "parquet",
    payload,
  });
  return { payload, manifestKey };
}

/**
 * A store whose manifest reads wait at `manifestGate` and which logs each
 * HEAD as it starts and ends: what went out while the manifest was read.
 */
class WatchedStore extends MemoryObjectStore {
  readonly manifestGate = new Gate();
  readonly events: string[] = [];
  /** Off while the archive is written. */
  watching = false;

  override async get(...args: Parameters<MemoryObjectStore["get"]>) {
    if (this.watching && args[0].includes("/manifests/")) {
      this.events.push("manifest get");
      await this.manifestGate.pass();
    }
    return await super.get(...args);
  }

  override async head(...args: Parameters<MemoryObjectStore["head"]>) {
    if (!this.watching) return await super.head(...args);
    this.events.push("head");
    try {
      return await super.head(...args);
    } finally {
      this.events.push("head done");
    }
  }
}

const checks = {
  "publish's (size)": (store: MemoryObjectStore, manifestKey: string, parts: never[]) =>
    verifyArchive(store, manifestKey, { bucket: REF, parts, verifyPayloadBytes: false }),
  "cleanup's (stored SHA-256)": (store: MemoryObjectStore, manifestKey: string, parts: never[]) =>
    checkPublishedArchive(store, manifestKey, { bucket: REF, parts }),
};

async function watched() {
  const store = new WatchedStore();
  const archive = await archived(store);
  store.watching = true;
  return { store, ...archive };
}

describe.each(Object.entries(checks))("%s archive check", (_, check) => {
  it("sends the recorded parts' HEADs while the manifest's read is in flight", async () => {
    const { store, payload, manifestKey } = await watched();
    const done = check(store, manifestKey, [payload] as never[]);
    await store.manifestGate.whenReached();
    await new Promise((resolve) => setImmediate(resolve));
    // Sent one after another, no HEAD would go out before the manifest's read returned.
    expect([...store.events].sort()).toEqual(["head", "head done", "manifest get"]);
    store.manifestGate.open();
    await done;
  });

  it("reports a missing manifest, not the missing part, and leaves no HEAD running", async () => {
    const { store, payload, manifestKey } = await watched();
    await store.delete(manifestKey);
    await store.delete(payload.key);
    store.manifestGate.open();
    const failure = await check(store, manifestKey, [payload] as never[]).catch((e: unknown) => e);
    expect(String(failure)).toMatch(/manifest/);
    expect(failure instanceof ObjectNotFoundError || failure instanceof ArchiveIntegrityError).toBe(
      true,
    );
    expect(store.events.at(-1)).toBe("head done");
  });

  it("reports a manifest that names other parts before a part that is missing", async () => {
    const { store, payload, manifestKey } = await watched();
    await store.delete(payload.key);
    store.manifestGate.open();
    const other = { ...payload, rowCount: payload.rowCount + 1 };
    await expect(check(store, manifestKey, [other] as never[])).rejects.toThrow(
      /manifest field (row_count|parts)/,
    );
    expect(store.events.at(-1)).toBe("head done");
  });

  it("reports a missing part once the manifest is valid", async () => {
    const { store, payload, manifestKey } = await watched();
    await store.delete(payload.key);
    store.manifestGate.open();
    await expect(check(store, manifestKey, [payload] as never[])).rejects.toThrow(
      new RegExp(`${payload.key}.*missing|missing.*${payload.byteLength}`),
    );
  });
});
