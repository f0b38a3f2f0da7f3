/**
 * A process that takes the embedded store's lock, for tests that need
 * several real processes: `node --import tsx lock-contender.ts DATA_DIR
 * START_AT_MS HOLD_MS [STALE_PAUSE_MS]`. Waits until START_AT_MS, tries once,
 * and prints one JSON line: `{"acquired": ms, "released": ms}` or
 * `{"refused": message}`. HOLD_MS of -1 holds until a signal arrives.
 * STALE_PAUSE_MS widens the race: it pauses between finding a stale lock and
 * breaking it, so every contender has seen the stale lock before any acts.
 */
import {
  EmbeddedStoreLock,
  EmbeddedStoreLockedError,
} from "../../src/adapters/sql/embedded-lock.js";

const [dataDir, startAtText, holdText, pauseText] = process.argv.slice(2);
const pauseMs = Number(pauseText ?? "0");
const startAt = Number(startAtText);
const holdMs = Number(holdText);
await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));
let lock: EmbeddedStoreLock;
try {
  lock = EmbeddedStoreLock.acquire(dataDir!, {
    command: "lock-contender",
    now: new Date(),
    faults: {
      afterStaleRead: () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, pauseMs),
    },
  });
} catch (error) {
  if (!(error instanceof EmbeddedStoreLockedError)) throw error;
  process.stdout.write(`${JSON.stringify({ refused: error.message })}\n`);
  process.exit(0);
}
const acquired = Date.now();
if (holdMs < 0) {
  process.stdout.write(`${JSON.stringify({ acquired, holding: true })}\n`);
  setInterval(() => undefined, 1000);
} else {
  await new Promise((resolve) => setTimeout(resolve, holdMs));
  const released = Date.now();
  lock.release();
  process.stdout.write(
    `${JSON.stringify({ acquired, released, tookOver: lock.tookOverFrom !== null })}\n`,
  );
}
