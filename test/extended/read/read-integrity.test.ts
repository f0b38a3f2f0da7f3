/**
 * Every read checks what it reads, on the file store: one changed byte in
 * an archived payload on disk makes `read`, `export`, `restore` and `query` fail
 * with an ArchiveIntegrityError naming the object, and no row of it is
 * ever returned.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  archiveOneBucket,
  changeJsonValue,
  flipDictionaryPage,
  flipFooterStatistics,
  flipValueDataPage,
  expectExportRefused,
  expectQueryRefused,
  expectReadRefused,
  expectRestoreRefused,
} from "../../support/integrity.js";
import { harnessOn, type Harness } from "../../support/workflow-harness.js";

describe("reads of a payload changed on the file store", () => {
  let dir: string;
  let temp: string;
  let h: Harness<FileObjectStore>;
  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-integrity-"));
    temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-integrity-temp-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir));
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(temp, { recursive: true, force: true });
  });

  /** Rewrite the object's file in place, as bit rot or a stray edit would. */
  const tamper = async (key: string, change: (bytes: Uint8Array) => Uint8Array) => {
    const file = fileURLToPath(await h.objects.uri(key));
    writeFileSync(file, change(readFileSync(file)));
  };

  describe("a JSON payload with one character of a value changed (still valid JSON)", () => {
    it("read, export, restore and query fail naming the payload and return none of its rows", async () => {
      const bucket = await archiveOneBucket(h, "json");
      await tamper(bucket.payloadKey, changeJsonValue);

      await expectReadRefused(
        h,
        bucket.payloadKey,
        /hashes to [0-9a-f]{64}, [0-9a-f]{64} in manifest/,
      );
      await expectExportRefused(h, bucket.payloadKey, "ndjson");
      await expectRestoreRefused(h, bucket);
      await expectQueryRefused(h, bucket.payloadKey, temp);
      expect(readdirSync(temp)).toEqual([]);
    });

    it("a payload missing its last line (still well-formed NDJSON) is refused before its first row", async () => {
      const bucket = await archiveOneBucket(h, "json");
      await tamper(bucket.payloadKey, (bytes) => {
        const lastLine = bytes.lastIndexOf(0x0a, bytes.byteLength - 2);
        return bytes.subarray(0, lastLine + 1);
      });

      await expectReadRefused(h, bucket.payloadKey, /streamed \d+ bytes, \d+ in manifest/);
    });
  });

  describe("a Parquet payload with one byte flipped", () => {
    it("in a data page (a value): read, export, restore and query fail naming the payload and return none of its rows", async () => {
      const bucket = await archiveOneBucket(h, "parquet");
      await tamper(bucket.payloadKey, flipValueDataPage);

      await expectReadRefused(
        h,
        bucket.payloadKey,
        /page at byte \d+ has CRC-32 \w+, its header states/,
      );
      await expectExportRefused(h, bucket.payloadKey, "parquet");
      await expectRestoreRefused(h, bucket);
      await expectQueryRefused(h, bucket.payloadKey, temp);
      expect(readdirSync(temp)).toEqual([]);
    });

    it("in the dictionary page (the partition key): read, export, restore and query fail naming the payload", async () => {
      const bucket = await archiveOneBucket(h, "parquet");
      await tamper(bucket.payloadKey, flipDictionaryPage);

      await expectReadRefused(h, bucket.payloadKey, /page at byte \d+ has CRC-32/);
      await expectExportRefused(h, bucket.payloadKey, "ndjson");
      await expectRestoreRefused(h, bucket);
      await expectQueryRefused(h, bucket.payloadKey, temp);
      expect(readdirSync(temp)).toEqual([]);
    });

    it("a manifest whose bytes no longer hash to its key (one byte of its created_by changed) is refused by read and export, naming the manifest", async () => {
      const bucket = await archiveOneBucket(h, "parquet");
      const manifestKey = (await h.inner.getBucket(bucket.id))!.manifestKey!;
      await tamper(manifestKey, (bytes) => {
        const text = Buffer.from(bytes).toString("utf8");
        const at = text.indexOf('"created_by": "') + '"created_by": "'.length;
        const changed = Buffer.from(text, "utf8");
        changed[at] = changed[at] === 0x70 ? 0x71 : 0x70;
        return changed;
      });

      await expectReadRefused(h, manifestKey, /manifest bytes hash to [0-9a-f]{64}, not to/);
      await expectExportRefused(h, manifestKey, "ndjson");
    });

    it("in the footer (a row group's event_time maximum): read, export, restore and query fail naming the payload", async () => {
      const bucket = await archiveOneBucket(h, "parquet");
      const last = bucket.records[bucket.records.length - 1]!.eventTime;
      await tamper(bucket.payloadKey, (bytes) => flipFooterStatistics(bytes, last));

      await expectReadRefused(h, bucket.payloadKey, /states maximum event_time/);
      await expectExportRefused(h, bucket.payloadKey, "ndjson");
      await expectRestoreRefused(h, bucket);
      await expectQueryRefused(h, bucket.payloadKey, temp);
      expect(readdirSync(temp)).toEqual([]);
    });
  });
});
