import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
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
