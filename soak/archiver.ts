/**
 * The fault soak's archiver process: the runtime of `pulpitum archive`
 * (configuration from the environment, src/open-adapters.ts, the standalone runner)
 * composed with what only the soak may inject, so no production entry point
 * grows a switch for it:
 *
 *   --clock-skew-ms N       this process's clock runs N ms ahead (negative:
 *                           behind) of the host's; every lease, retry time and
 *                           cutoff it computes uses it
 *   --cutoffs-ahead-ms N    every cutoff it hands the hot store is computed
 *                           as if its clock ran N ms ahead, while its leases
 *                           keep the host's clock (faults/cutoffs-ahead.ts)
 *   --sabotage adopt-orphans  payload keys lose their attempt part (see
 *                           faults/adopt-orphans.ts)
 *
 * and, when SOAK_TIMEOUT_SPIKES is set, the big buckets' snapshot pages
 * fail with the server's statement timeout while a spike is on
 * (faults/timeout-spikes.ts).
 *
 * It logs outcomes exactly as `pulpitum archive` does with PULPITUM_LOG=debug,
 * so the soak tallies both alike. The fault proxies are not started here: the
 * soak points DATABASE_URL and AWS_ENDPOINT_URL at them.
 */
import { parseArgs } from "node:util";
import { openObjectStore } from "../src/adapters/object-store/index.js";
import { stderrLog } from "../src/cli/log.js";
import { describeBucket } from "../src/domain/bucket.js";
import { errorMessage } from "../src/errors.js";
import type { Clock } from "../src/ports/clock.js";
import { runStandalone } from "../src/runner/standalone.js";
import { loadConfig, openAdapters, s3Timeouts } from "../src/open-adapters.js";
import { SqlHotStore } from "../src/adapters/sql/index.js";
import { ContentOnlyPayloadStore, recordingContentOnlyKeys } from "./faults/adopt-orphans.js";
import { cutoffsAhead } from "./faults/cutoffs-ahead.js";
import { spikesFromEnv, spikingHotStore } from "./faults/timeout-spikes.js";

/** A clock `skewMs` ahead of the host's (behind when negative). */
function skewedClock(skewMs: number): Clock {
  return { now: () => new Date(Date.now() + skewMs) };
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      "clock-skew-ms": { type: "string", default: "0" },
      "cutoffs-ahead-ms": { type: "string", default: "0" },
      sabotage: { type: "string", default: "none" },
    },
    strict: true,
  });
  const skewMs = Number(values["clock-skew-ms"]);
  if (!Number.isInteger(skewMs)) throw new Error("--clock-skew-ms: expected an integer");
  const cutoffsAheadMs = Number(values["cutoffs-ahead-ms"]);
  if (!Number.isInteger(cutoffsAheadMs)) throw new Error("--cutoffs-ahead-ms: expected an integer");
  const sabotage = values.sabotage;
  if (sabotage !== "none" && sabotage !== "adopt-orphans")
    throw new Error(`--sabotage ${sabotage}: expected none or adopt-orphans`);

  const log = stderrLog(process.env.PULPITUM_LOG === "debug");
  const config = loadConfig();
  let objectStore;
  if (sabotage === "adopt-orphans") {
    if (config.archive.kind !== "s3") throw new Error("the soak archiver expects an s3:// archive");
    const store = openObjectStore(config.archive, {
      region: process.env.AWS_REGION,
      timeouts: s3Timeouts(config),
    });
    objectStore = new ContentOnlyPayloadStore(store, (key) =>
      log.warn("SABOTAGE adopted an existing payload object", { key }),
    );
  }
  const runtime = await openAdapters(config, { clock: skewedClock(skewMs), objectStore });
  log.warn("soak archiver started", {
    clock_skew_ms: skewMs,
    cutoffs_ahead_ms: cutoffsAheadMs,
    sabotage,
  });
  const controller = new AbortController();
  const onSignal = () => controller.abort();
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    const base = runtime.context(log);
    const spikes = spikesFromEnv(process.env);
    const spiked =
      spikes === undefined || !(base.hotStore instanceof SqlHotStore)
        ? base.hotStore
        : spikingHotStore(base.hotStore, base.hotStore.db, spikes, (line, fields) =>
            log.warn(line, fields),
          );
    const hotStore = cutoffsAheadMs === 0 ? spiked : cutoffsAhead(spiked, cutoffsAheadMs);
    const ctx =
      sabotage === "adopt-orphans"
        ? { ...base, hotStore: recordingContentOnlyKeys(hotStore) }
        : { ...base, hotStore };
    const summary = await runStandalone(ctx, {
      workers: config.workers,
      intervalMs: config.intervalSeconds * 1000,
      once: false,
      signal: controller.signal,
      onOutcome: (o) =>
        log.info(`${o.phase ?? "-"} ${o.result}`, {
          bucket: describeBucket(o.bucket),
          next: o.next,
          reason: o.reason,
          ms: o.durationMs,
        }),
    });
    log.warn("soak archiver stopped", { ...summary });
    return 0;
  } finally {
    await runtime.close();
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`soak archiver: ${errorMessage(error)}\n`);
  process.exitCode = 1;
}
