/**
 * The query catalog under delays on the real SQL hot store (PGlite) and the
 * real filesystem object store: the cases of test/support/catalog-races.ts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { catalogRaceSuite, PREFIX } from "../../support/catalog-races.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { harnessOn } from "../../support/workflow-harness.js";

catalogRaceSuite("PGlite and the file store", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-catalog-races-"));
  const h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir), {
    archivePrefix: PREFIX,
  });
  return {
    h,
    close: async () => {
      await h.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
