/**
 * The worker-thread entry every function bundle carries beside its
 * index.mjs. src/archive/payload-check.ts spawns
 * `./payload-check-worker` + its own module's extension from its own URL,
 * which in a bundle is index.mjs; when the file is absent it checks on the
 * main thread (slower, same result), so only a test notices a bundle
 * without it. Kept free of CDK imports so the bench names the same files.
 */

/** The entry's source, relative to the project root. */
export const PAYLOAD_CHECK_WORKER_SOURCE = "src/archive/payload-check-worker.ts";

/** The bundled entry's file name, in the directory of the bundle that spawns it. */
export const PAYLOAD_CHECK_WORKER_BUNDLE = "payload-check-worker.mjs";
