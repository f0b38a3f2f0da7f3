/**
 * ESM bundles still meet CommonJS code (pg) that
 * calls `require` or reads `__dirname`; this banner, placed at the top of
 * every function bundle, defines both. Kept free of CDK imports so the bench
 * can bundle its export child exactly like the worker.
 */
export const ESM_BANNER =
  "import { createRequire as __pulpitumCreateRequire } from 'node:module';" +
  "import { fileURLToPath as __pulpitumFileUrlToPath } from 'node:url';" +
  "import { dirname as __pulpitumDirname } from 'node:path';" +
  "const require = __pulpitumCreateRequire(import.meta.url);" +
  "const __filename = __pulpitumFileUrlToPath(import.meta.url);" +
  "const __dirname = __pulpitumDirname(__filename);";
