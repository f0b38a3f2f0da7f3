/**
 * The bench runs its export children from esbuild bundles under plain node,
 * as the worker Lambda runs; the export spawns its payload check from a file
 * beside its own module and quietly checks on the main thread without it,
 * so each bundled child must have that file next to it.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { bundleExportChild } from "../../../bench/export-child.js";
import { PAYLOAD_CHECK_WORKER_BUNDLE } from "../../../infra/worker-entries.js";
import { loadInWorkerThreads, nonBuiltinImports } from "../../support/worker-bundle.js";

const OUT_ROOT = mkdtempSync(path.join(os.tmpdir(), "pulpitum-bench-bundle-"));
afterAll(() => rmSync(OUT_ROOT, { recursive: true, force: true }));

const benchFile = (name: string) =>
  fileURLToPath(new URL(`../../../bench/${name}`, import.meta.url));

describe("the bench's bundled children", () => {
  it.each([
    ["export-child.mjs", undefined],
    ["segmented-child.mjs", benchFile("segmented-child.ts")],
    ["breakdown-child.mjs", benchFile("breakdown-child.ts")],
  ])(
    "%s has the payload-check worker beside it, self-contained and loading in a worker thread",
    async (bundleName, entry) => {
      const dir = mkdtempSync(path.join(OUT_ROOT, "child-"));

      const bundle = await bundleExportChild(dir, entry);

      expect(bundle).toBe(path.join(dir, bundleName));
      expect(readdirSync(dir).sort()).toEqual([PAYLOAD_CHECK_WORKER_BUNDLE, bundleName].sort());
      const worker = path.join(dir, PAYLOAD_CHECK_WORKER_BUNDLE);
      expect(await nonBuiltinImports(worker)).toEqual([]);
      expect(await loadInWorkerThreads([worker])).toEqual(["loaded"]);
    },
    60_000,
  );
});
