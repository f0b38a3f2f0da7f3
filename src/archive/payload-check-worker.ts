/**
 * Worker-thread entry that checks a payload file while it is written (see
 * payload-check.ts). Placeholder until the check lands; it answers nothing.
 */
import { parentPort } from "node:worker_threads";

parentPort?.on("message", () => undefined);
