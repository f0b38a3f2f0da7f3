/**
 * The worker thread that checks payload files while they are written (see
 * payload-check.ts, which starts it from this module's path).
 */
import { parentPort } from "node:worker_threads";
import { serveChecks } from "./payload-check.js";

if (parentPort !== null) serveChecks(parentPort);
