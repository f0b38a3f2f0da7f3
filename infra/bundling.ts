import { aws_lambda_nodejs as nodejs } from "aws-cdk-lib";
import { ESM_BANNER } from "./esm-banner.js";

/**
 * Local esbuild bundling (no Docker), ESM for Node 22: one self-contained
 * index.mjs (no wasm binary beside it since parquet-wasm was removed).
 */
export function bundlingOptions(): nodejs.BundlingOptions {
  return {
    forceDockerBundling: false,
    format: nodejs.OutputFormat.ESM,
    target: "node22",
    mainFields: ["module", "main"],
    banner: ESM_BANNER,
    minify: true,
    // Error class names appear in logs and in PulpitumError.name.
    keepNames: true,
    sourceMap: true,
    sourcesContent: false,
    // Pin the SDK version the code was tested with instead of the runtime's.
    bundleAwsSDK: true,
    // pg's optional native binding is never used.
    externalModules: ["pg-native"],
    // Warnings and errors only: esbuild's per-bundle size summary (with its
    // ⚠️ over 1 MB) is expected for bundles that carry the SDK.
    logLevel: nodejs.LogLevel.WARNING,
  };
}
