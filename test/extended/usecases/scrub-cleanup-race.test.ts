/**
 * Scrub × cleanup on the file store (PGlite): a stale passing scrub never
 * erases a newer corrupt mark, and cleanup deletes hot rows only after the
 * stored bytes proved to be the published ones, not merely the same size.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  damagePayloadInPlace,
  expectCleanupKeepsEveryHotRow,
  publishedAwaitingCleanup,
  staleScrubAgainstNewerMark,
} from "../../support/scrub-cleanup-race.js";
import { harnessOn, type Harness } from "../../support/workflow-harness.js";

const STORES = {
  "the file store": (dir: string) => new FileObjectStore(dir),
  "the memory store": () => new MemoryObjectStore(),
};

for (const [storeName, makeStore] of Object.entries(STORES)) {
  describe(`scrub and cleanup on ${storeName}`, () => {
    let dir: string;
    let h: Harness<ObjectStore>;
    beforeEach(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-scrub-race-"));
      h = harnessOn(await freshPgliteHotStore(), makeStore(dir));
    });
    afterEach(async () => {
      await h.close();
      rmSync(dir, { recursive: true, force: true });
    });

    for (const format of ["parquet", "json"] as const) {
      it(`a slow scrub that read a ${format} bucket before a newer corrupt mark never clears it, and cleanup keeps every hot row`, async () => {
        await staleScrubAgainstNewerMark(h, format);
      });

      it(`cleanup refuses a ${format} payload changed at rest to other bytes of the same size, with no scrub to mark it, and keeps every hot row`, async () => {
        const bucket = await publishedAwaitingCleanup(h, format);
        await damagePayloadInPlace(h, bucket, format);
        await expectCleanupKeepsEveryHotRow(h, bucket);
      });
    }
  });
}
