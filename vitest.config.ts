import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

/**
 * The unit suite's test files run on every core: vitest's default (one
 * fewer than the cores) runs them one at a time on a 2-core machine, where
 * the main process is idle while a file runs (PGlite and the archive code
 * are CPU-bound in the worker).
 */
const UNIT_WORKERS = Math.max(2, availableParallelism());

export default defineConfig({
  test: {
    // The integration project runs its files one at a time (fileParallelism: false).
    maxWorkers: UNIT_WORKERS,
    projects: [
      {
        test: {
          name: "unit",
          include: [
            "test/unit/**/*.test.ts",
            "test/conformance/**/*.unit.test.ts",
            "test/fuzz/**/*.fuzz.test.ts",
          ],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        // The long scenarios on the embedded store (whole workflows with
        // failures injected, every documented command, the bundled stack):
        // `npm run test:extended`, which .ci/run also runs.
        test: {
          name: "extended",
          include: ["test/extended/**/*.test.ts"],
          // A whole workflow takes seconds on a quiet machine and minutes on a loaded one.
          testTimeout: 180_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          testTimeout: 300_000,
          hookTimeout: 120_000,
          globalSetup: ["test/support/integration-setup.ts"],
          fileParallelism: false,
        },
      },
    ],
  },
});
