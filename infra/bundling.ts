import path from "node:path";
import { aws_lambda_nodejs as nodejs } from "aws-cdk-lib";
import { ESM_BANNER } from "./esm-banner.js";
import { PAYLOAD_CHECK_WORKER_BUNDLE, PAYLOAD_CHECK_WORKER_SOURCE } from "./worker-entries.js";

/** The esbuild settings the function bundle and its worker-thread entry share. */
const SHARED = {
  format: nodejs.OutputFormat.ESM,
  target: "node22",
  mainFields: ["module", "main"],
  banner: ESM_BANNER,
  minify: true,
  // Error class names appear in logs and in PulpitumError.name.
  keepNames: true,
  sourceMap: true,
  sourcesContent: false,
  // pg's optional native binding is never used.
  externalModules: ["pg-native"],
  // Warnings and errors only: esbuild's per-bundle size summary (with its
  // ⚠️ over 1 MB) is expected for bundles that carry the SDK.
  logLevel: nodejs.LogLevel.WARNING,
} as const satisfies nodejs.BundlingOptions;

/**
 * Local esbuild bundling (no Docker), ESM for Node 22: one self-contained
 * index.mjs and, beside it, the worker-thread entry it spawns
 * (worker-entries.ts), bundled with the same settings.
 */
export function bundlingOptions(): nodejs.BundlingOptions {
  return {
    ...SHARED,
    mainFields: [...SHARED.mainFields],
    externalModules: [...SHARED.externalModules],
    forceDockerBundling: false,
    // Pin the SDK version the code was tested with instead of the runtime's.
    bundleAwsSDK: true,
    commandHooks: {
      beforeBundling: () => [],
      beforeInstall: () => [],
      afterBundling: (inputDir, outputDir) => [workerBundleCommand(inputDir, outputDir)],
    },
  };
}

/**
 * The POSIX shell command (local bundling runs hooks with `bash -c`) that
 * bundles the worker-thread entry into `outputDir` with the project's
 * esbuild, run from `inputDir` (the project root).
 */
function workerBundleCommand(inputDir: string, outputDir: string): string {
  const esbuild = [
    path.join("node_modules", ".bin", "esbuild"),
    PAYLOAD_CHECK_WORKER_SOURCE,
    "--bundle",
    "--platform=node",
    `--format=${SHARED.format}`,
    `--target=${SHARED.target}`,
    `--main-fields=${SHARED.mainFields.join(",")}`,
    `--banner:js=${SHARED.banner}`,
    ...(SHARED.minify ? ["--minify"] : []),
    ...(SHARED.keepNames ? ["--keep-names"] : []),
    ...(SHARED.sourceMap ? ["--sourcemap"] : []),
    `--sources-content=${SHARED.sourcesContent}`,
    ...SHARED.externalModules.map((name) => `--external:${name}`),
    `--log-level=${SHARED.logLevel}`,
    `--outfile=${path.join(outputDir, PAYLOAD_CHECK_WORKER_BUNDLE)}`,
  ];
  return `cd ${shellQuote(inputDir)} && ${esbuild.map(shellQuote).join(" ")}`;
}

/** One POSIX shell word: single-quoted, each embedded quote closed, escaped and reopened. */
function shellQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}
