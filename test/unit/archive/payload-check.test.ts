/**
 * Checking a payload file while it is written (src/archive/payload-check.ts):
 * on the check thread or on this one, the result must be the whole-file
 * check's, announcements must never vouch for bytes the footer does not
 * name, damage in an announced group must fail the check, and a check whose
 * thread died must be done again here.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fileByteSource } from "../../../src/archive/byte-sources.js";
import type { AnnouncedRowGroup } from "../../../src/archive/parquet/announced-groups.js";
import {
  payloadCheckPlace,
  startPayloadCheck,
  stopCheckThread,
  type CheckPlace,
  type PayloadCheckTarget,
} from "../../../src/archive/payload-check.js";
import { inspectPayload, type PayloadExpectations } from "../../../src/archive/payload-reader.js";
import { writePayloadFile, type WrittenPayload } from "../../../src/archive/payload-writer.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";

const PARTITION = Buffer.from("tenant-7");
const START = parseRfc3339Micros("2024-01-01T00:00:00Z");
const EXPECTED: PayloadExpectations = {
  partitionKey: PARTITION,
  start: START,
  end: START + 86_400_000_000n,
};
const PLACES: CheckPlace[] = ["thread", "here"];

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "payload-check-test-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Rows whose values end in `noiseBytes` random (incompressible) bytes. */
function rows(count: number, noiseBytes = 0): BucketRow[] {
  return Array.from({ length: count }, (_, i) => ({
    eventTime: START + BigInt(i) * 1000n,
    sortKey: Buffer.from(`sk-${String(i).padStart(6, "0")}`),
    value: Buffer.concat([
      Buffer.from(`value ${i} ${"x".repeat(i % 50)}`),
      randomBytes(noiseBytes),
    ]),
  }));
}

async function* pages(all: readonly BucketRow[]): AsyncIterable<BucketRow[]> {
  for (let i = 0; i < all.length; i += 700) yield all.slice(i, i + 700);
}

/** Write a Parquet file of `count` rows in row groups of 500, keeping the writer's announcements. */
async function writeParquet(
  count: number,
  noiseBytes = 0,
): Promise<{
  written: WrittenPayload;
  groups: AnnouncedRowGroup[];
  /** The writer's reports of the bytes in the file, in order. */
  inFile: number[];
  target: PayloadCheckTarget;
}> {
  const filePath = path.join(dir, `payload-${count}.parquet`);
  const groups: AnnouncedRowGroup[] = [];
  const inFile: number[] = [];
  const written = await writePayloadFile(
    "parquet",
    PARTITION,
    pages(rows(count, noiseBytes)),
    filePath,
    { rowGroupRows: 500 },
    {
      onRowGroupWritten: (group) => groups.push(group),
      onBytesWritten: (byteLength) => inFile.push(byteLength),
    },
  );
  return { written, groups, inFile, target: { filePath, format: "parquet", expected: EXPECTED } };
}

async function wholeFileCheck(target: PayloadCheckTarget) {
  const source = await fileByteSource(target.filePath);
  try {
    return await inspectPayload(source, target.format, target.expected);
  } finally {
    await source.close();
  }
}

const sha256Of = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

async function flipByte(filePath: string, at: number): Promise<void> {
  const handle = await open(filePath, "r+");
  try {
    const byte = Buffer.alloc(1);
    await handle.read(byte, 0, 1, at);
    byte[0] = byte[0]! ^ 0x5a;
    await handle.write(byte, 0, 1, at);
  } finally {
    await handle.close();
  }
}

describe("checking a payload while it is written", () => {
  it("runs on the check thread here (its module sits beside payload-check.ts)", () => {
    expect(payloadCheckPlace()).toBe("thread");
  });

  it.each(PLACES)(
    "on %s, a Parquet file announced group by group gives the whole-file check's rows and digest",
    async (place) => {
      const { written, groups, target } = await writeParquet(5_250);
      expect(groups).toHaveLength(11);

      const check = startPayloadCheck(target, place);
      for (const group of groups) check.announce(group);
      const content = await check.finish(written.byteLength).content;

      expect(content).toEqual(await wholeFileCheck(target));
      expect(content).toEqual({ rowCount: 5_250, rowsDigest: written.rowsDigest });
    },
  );

  /** Which of the writer's reports of bytes in the file the check hears. */
  const HEARD: [string, (inFile: number[]) => number[]][] = [
    ["every report", (inFile) => inFile],
    ["every other report", (inFile) => inFile.filter((_, i) => i % 2 === 1)],
    ["no report", () => []],
  ];

  it.each(PLACES.flatMap((place) => HEARD.map((c) => [place, ...c] as const)))(
    "on %s, hearing %s of the bytes written, the check's SHA-256 is the finished file's",
    async (place, _what, heard) => {
      const { written, groups, inFile, target } = await writeParquet(12_000, 1_000);
      // Over 8 MiB, so the writer reports before its end, and hashing at once takes many reads.
      expect(written.byteLength).toBeGreaterThan(8 << 20);
      expect(inFile.length).toBeGreaterThan(1);
      expect(inFile[inFile.length - 1]).toBe(written.byteLength);
      const check = startPayloadCheck(target, place);
      for (const group of groups) check.announce(group);
      for (const byteLength of heard(inFile)) check.written(byteLength);
      const finished = check.finish(written.byteLength);

      expect(await finished.sha256).toBe(sha256Of(await readFile(target.filePath)));
      expect(await finished.content).toEqual({ rowCount: 12_000, rowsDigest: written.rowsDigest });
    },
  );

  it.each(PLACES)(
    "on %s, bytes said to be written past the file's end fail the hash and the check, naming the file",
    async (place) => {
      const { written, groups, target } = await writeParquet(1_000);
      const check = startPayloadCheck(target, place);
      for (const group of groups) check.announce(group);
      check.written(written.byteLength + 10);
      const finished = check.finish(written.byteLength + 10);

      const expected = new RegExp(
        `${target.filePath}.*the file ends at ${written.byteLength} bytes, ${written.byteLength + 10} were written`,
      );
      await expect(finished.sha256).rejects.toThrow(expected);
      await expect(finished.content).rejects.toThrow(expected);
    },
  );

  it.each(PLACES)("on %s, a JSON file is checked whole once finished", async (place) => {
    const filePath = path.join(dir, "payload.json");
    const written = await writePayloadFile("json", PARTITION, pages(rows(1_200)), filePath);
    const check = startPayloadCheck({ filePath, format: "json", expected: EXPECTED }, place);

    const finished = check.finish(written.byteLength);

    expect(await finished.content).toEqual({ rowCount: 1_200, rowsDigest: written.rowsDigest });
    expect(await finished.sha256).toBe(sha256Of(await readFile(filePath)));
  });

  it.each(PLACES)(
    "on %s, a byte damaged in an announced row group fails the check, naming the file and the group",
    async (place) => {
      const { written, groups, target } = await writeParquet(3_000);
      const [start, end] = groups[2]!.chunks[3]!;
      await flipByte(target.filePath, start + Math.floor((end - start) / 2));

      const check = startPayloadCheck(target, place);
      for (const group of groups) check.announce(group);
      const failure = await check.finish(written.byteLength).content.catch((e: unknown) => e);

      expect(failure).toBeInstanceOf(ArchiveIntegrityError);
      expect((failure as ArchiveIntegrityError).objectKey).toBe(target.filePath);
      expect((failure as ArchiveIntegrityError).message).toMatch(/byte \d+ has CRC-32/);
    },
  );

  /** Announcements that leave groups out: the footer names more than was checked. */
  const PARTIAL: [string, number, (groups: AnnouncedRowGroup[]) => AnnouncedRowGroup[]][] = [
    // The three announced groups alone hold 1,500 rows with their own digest.
    ["only its first three groups", 4_000, (groups) => groups.slice(0, 3)],
    ["all but group 1 (the rest in order)", 2_000, (groups) => [groups[0]!, ...groups.slice(2)]],
  ];

  it.each(PLACES.flatMap((place) => PARTIAL.map((c) => [place, ...c] as const)))(
    "on %s, announcing %s does not vouch for the rest: the footer decides and every row is counted",
    async (place, _what, rowCount, announcedOf) => {
      const { written, groups, target } = await writeParquet(rowCount);
      const check = startPayloadCheck(target, place);
      for (const group of announcedOf(groups)) check.announce(group);

      expect(await check.finish(written.byteLength).content).toEqual({
        rowCount,
        rowsDigest: written.rowsDigest,
      });
    },
  );

  it.each(PLACES)(
    "on %s, groups announced out of order fail the check on the order of their rows",
    async (place) => {
      const { written, groups, target } = await writeParquet(2_000);
      const check = startPayloadCheck(target, place);
      for (const group of [groups[1]!, groups[0]!, ...groups.slice(2)]) check.announce(group);

      await expect(check.finish(written.byteLength).content).rejects.toThrow(
        /record 500 is not after record 499 in \(event_time, sort_key\) order/,
      );
    },
  );

  it.each(PLACES)(
    "on %s, a footer stating another minimum event_time than its announced group's rows hold fails the check",
    async (place) => {
      const { written, groups, target } = await writeParquet(2_000);
      // Group 1's first row is row 500; the footer (after the last chunk) states it in nanoseconds.
      const footerStart = groups[groups.length - 1]!.chunks[3]![1];
      const stated = Buffer.alloc(8);
      stated.writeBigInt64LE((START + 500n * 1000n) * 1000n);
      const handle = await open(target.filePath, "r+");
      try {
        const tail = Buffer.alloc(written.byteLength - footerStart);
        await handle.read(tail, 0, tail.byteLength, footerStart);
        const moved = Buffer.alloc(8);
        moved.writeBigInt64LE((START + 500n * 1000n + 1n) * 1000n);
        let changed = 0;
        for (let at = tail.indexOf(stated); at >= 0; at = tail.indexOf(stated, at + 8)) {
          await handle.write(moved, 0, 8, footerStart + at);
          changed++;
        }
        expect(changed).toBeGreaterThan(0);
      } finally {
        await handle.close();
      }
      const check = startPayloadCheck(target, place);
      for (const group of groups) check.announce(group);

      await expect(check.finish(written.byteLength).content).rejects.toThrow(
        /record 500 has event_time \d+ µs, its row group states a minimum of \d+ µs/,
      );
    },
  );

  it.each(PLACES)(
    "on %s, a file that is not as long as its writer counted fails the check",
    async (place) => {
      const { written, groups, target } = await writeParquet(1_000);
      const check = startPayloadCheck(target, place);
      for (const group of groups) check.announce(group);

      await expect(check.finish(written.byteLength + 1).content).rejects.toThrow(
        new RegExp(`the file holds ${written.byteLength} bytes, ${written.byteLength + 1} were`),
      );
    },
  );

  it("a check whose thread stopped before its finish is done again on this thread, on the whole file", async () => {
    const { written, groups, target } = await writeParquet(3_000);
    const check = startPayloadCheck(target, "thread");
    for (const group of groups) check.announce(group);

    await stopCheckThread();
    const finished = check.finish(written.byteLength);
    const content = await finished.content;

    expect(content).toEqual({ rowCount: 3_000, rowsDigest: written.rowsDigest });
    expect(await finished.sha256).toBe(sha256Of(await readFile(target.filePath)));
    // The next check starts a new thread.
    expect(payloadCheckPlace()).toBe("thread");
    const again = startPayloadCheck(target, "thread");
    for (const group of groups) again.announce(group);
    expect(await again.finish(written.byteLength).content).toEqual(content);
  });

  it("a check stopped mid-way by its thread's end still refuses a damaged file", async () => {
    const { written, groups, target } = await writeParquet(2_000);
    const [start] = groups[3]!.chunks[2]!;
    await flipByte(target.filePath, start + 40);
    const check = startPayloadCheck(target, "thread");
    for (const group of groups) check.announce(group);

    const finished = check.finish(written.byteLength);
    const finishing = finished.content.catch((e: unknown) => e);
    await stopCheckThread();

    expect(await finishing).toBeInstanceOf(ArchiveIntegrityError);
    // The damage is in a row, not in how the file hashes: the hash still settles, to the file's.
    expect(await finished.sha256).toBe(sha256Of(await readFile(target.filePath)));
  });

  it("a cancelled check leaves the thread serving the next one", async () => {
    const { written, groups, target } = await writeParquet(1_500);
    const cancelled = startPayloadCheck(target, "thread");
    cancelled.announce(groups[0]!);
    cancelled.cancel();

    const check = startPayloadCheck(target, "thread");
    for (const group of groups) check.announce(group);

    expect(await check.finish(written.byteLength).content).toEqual({
      rowCount: 1_500,
      rowsDigest: written.rowsDigest,
    });
  });
});
