/**
 * The chaos soak (`npm run soak`, `npm run soak -- --quick`).
 *
 * Real `pulpitum archive` processes archive a PostgreSQL hot store into S3
 * while the soak SIGKILLs them at random moments and restarts them;
 * appenders keep writing (also into buckets being fenced) and readers keep
 * reading across tiers, each read held to the ledger of committed appends.
 * When the chaos stops, a clean `archive --once` finishes the work and the
 * end check proves every committed record is stored exactly once, in the
 * tier its bucket's route names, behind a manifest that verifies.
 *
 * Every feature runs at once (issue 32, soak/mix.ts): half the archivers
 * export in small parts, GC runs as bounded (Lambda) and unbounded
 * (`gc --include-unowned`) passes, some held past the minimum age, restores
 * re-archive buckets (some after a switch of the table's format), buckets are
 * quarantined and retried, extra tables are dropped, catalog writes are
 * delayed and reordered by a proxy, and a reader queries through the
 * catalog (soak/catalog-reader.ts); every restored bucket must end archived
 * again and every table's catalog must match the ledger at the end.
 *
 * With `--faults` (issue 13) the chaos also injects infrastructure faults
 * through loopback proxies in front of S3 and PostgreSQL, restarts
 * PostgreSQL and runs the soak's own archiver entry (soak/archiver.ts) with
 * a skewed clock per process (soak/fault-mode.ts).
 *
 * Stages: environment -> seed -> chaos (kills, appends, reads; the mix;
 * faults) -> quiesce -> final archive --once -> end check -> catalog check. The last line
 * printed is one JSON object with the figures; the exit code is 0 only when
 * nothing was lost, duplicated or read from the wrong tier, every bucket
 * converged and the profile's goals were met.
 */
import { clockSkewBoundMs } from "../src/usecases/clock-skew.js";
import type { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { S3ObjectStore } from "../src/adapters/object-store/s3.js";
import { METADATA_TABLE } from "../src/adapters/sql/migrations.js";
import { parseConfig } from "../src/config/config.js";
import { systemClock } from "../src/ports/clock.js";
import { silentLog } from "../src/usecases/context.js";
import { DurableTable } from "../src/read/durable-table.js";
import { openAdapters, type Adapters } from "../src/open-adapters.js";
import type { RunningService } from "../test/support/services.js";
import { newAppendFigures, runAppender } from "./appenders.js";
import { runEndCheck, type EndCheck } from "./end-check.js";
import { prepareEnvironment, type SoakEnvironment } from "./environment.js";
import { ArchiverFleet, REPO_ROOT, runOnce, tallyOutcomes } from "./fleet.js";
import { Ledger, partitionRef } from "./ledger.js";
import { MetadataMonitor } from "./monitor.js";
import {
  CUTOFF_FINAL,
  CUTOFF_START,
  parseSoakOptions,
  USAGE,
  type SoakOptions,
} from "./profile.js";
import { Random, sleep } from "./random.js";
import { newReadFigures, runReader } from "./readers.js";
import { sabotage } from "./sabotage.js";
import { buildCatalog, seed } from "./workload.js";
import { FaultMode } from "./fault-mode.js";
import { catalogDelay, FaultHarness } from "./faults/harness.js";
import { CALM_S3, newS3FaultFigures, S3FaultProxy } from "./faults/s3-proxy.js";
import { finalCatalogCheck } from "./catalog-reader.js";
import { FeatureMix } from "./mix.js";
import { checkQuarantines, poisonOneBucket } from "./poison.js";
import { PolicyChaos } from "./policy.js";
import { ExpiryChaos } from "./expiry.js";
import { ErasureChaos } from "./erasure.js";
import {
  awaitCooledQuarantines,
  planTimeoutSpikes,
  SOAK_QUARANTINE_COOLDOWN_SECONDS,
  SOAK_QUARANTINE_SPAN_SECONDS,
  spikesEnv,
  tallySelfRetryingQuarantines,
  tallySpikedPages,
  type SpikeWindow,
} from "./faults/timeout-spikes.js";

const LEASE_SECONDS = 3;
const LEASE_RENEWAL_SECONDS = 1;
/** ARCHIVER_MAX_ATTEMPTS of every archiver (see workerEnv). */
const SOAK_MAX_ATTEMPTS = 12;
/** Clean `archive --once` runs allowed after the chaos before the soak gives up on convergence. */
const FINAL_RUNS = 4;

const startedAt = Date.now();
const elapsed = () => (Date.now() - startedAt) / 1000;
const log = (line: string) => process.stderr.write(`[soak ${elapsed().toFixed(1)}s] ${line}\n`);

async function main(argv: string[]): Promise<number> {
  let options: SoakOptions | "help";
  try {
    options = parseSoakOptions(argv);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (options === "help") {
    console.log(USAGE);
    return 0;
  }
  const { profile } = options;
  const random = new Random(options.seed);
  const workDir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-soak-"));
  log(
    `${profile.name}${options.faults ? " fault" : ""} soak, seed ${options.seed}, sabotage ${options.sabotage}, work folder ${workDir}`,
  );

  const services: RunningService[] = [];
  const stop = new AbortController();
  let env: SoakEnvironment | undefined;
  let runtime: Adapters | undefined;
  let fleet: ArchiverFleet | undefined;
  let finalChild: ReturnType<typeof spawn> | undefined;
  let faultMode: FaultMode | undefined;
  let delayProxy: S3FaultProxy | undefined;
  let delayedClients: Adapters | undefined;
  let mix: FeatureMix | undefined;
  let cleanedUp = false;
  const cleanup = async (keepData: boolean) => {
    if (cleanedUp) return;
    cleanedUp = true;
    stop.abort();
    fleet?.killAllNow();
    finalChild?.kill("SIGKILL");
    await mix?.stop().catch(() => undefined);
    await mix?.stopReader().catch(() => undefined);
    await faultMode?.close();
    await delayProxy?.stop().catch(() => undefined);
    await delayedClients?.close().catch(() => undefined);
    await runtime?.close().catch(() => undefined);
    await env?.teardown(keepData).catch(() => undefined);
    for (const s of services.reverse()) await s.stop().catch(() => undefined);
  };
  const figures: Record<string, unknown> = {
    buckets: 0,
    kills: 0,
    records: 0,
    lost: 0,
    duplicated: 0,
    wrong_tier_reads: 0,
    s3_faults: 0,
    db_restarts: 0,
    skewed_processes: 0,
    gc_runs: 0,
    gc_deleted: 0,
    restores: 0,
    multipart_buckets: 0,
    catalog_checks: 0,
    catalog_mismatches: 0,
    corrupt_marks: 0,
    scrub_runs: 0,
    long_gc_passes: 0,
    format_switches: 0,
    quarantine_retries: 0,
  };
  const interrupt = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping the archivers and services`);
    void cleanup(false).finally(() => {
      console.log(JSON.stringify({ ...figures, converged: false, aborted: signal }));
      process.exit(130);
    });
  };
  process.once("SIGINT", interrupt);
  process.once("SIGTERM", interrupt);
  // A crash of the soak itself must not leave archivers running against the services.
  const crash = (error: unknown) => {
    log(`soak crashed: ${(error as Error)?.stack ?? String(error)}`);
    fleet?.killAllNow();
    void cleanup(false).finally(() => {
      console.log(JSON.stringify({ ...figures, converged: false, aborted: "crash" }));
      process.exit(1);
    });
  };
  process.once("uncaughtException", crash);
  // A rejection the product handles a moment later (a promise awaited only after another await)
  // is noted, not a crash of the soak; Node without a handler would have ended the process.
  const handledLate = new WeakSet<Promise<unknown>>();
  let lateHandledRejections = 0;
  const onRejectionHandled = (promise: Promise<unknown>) => handledLate.add(promise);
  const onUnhandledRejection = (reason: unknown, promise: Promise<unknown>) => {
    setTimeout(() => {
      if (!handledLate.has(promise)) return crash(reason);
      lateHandledRejections++;
      figures.rejections_handled_late = lateHandledRejections;
      if (lateHandledRejections <= 3)
        log(
          `a rejection went unhandled, then was handled late: ${String((reason as Error)?.stack ?? reason)}`,
        );
    }, 2000);
  };
  process.on("rejectionHandled", onRejectionHandled);
  process.on("unhandledRejection", onUnhandledRejection);
  const deadline = setTimeout(() => {
    log(`deadline of ${profile.deadlineSeconds}s reached: aborting`);
    void cleanup(false).finally(() => {
      console.log(JSON.stringify({ ...figures, converged: false, aborted: "deadline" }));
      process.exit(1);
    });
  }, profile.deadlineSeconds * 1000);
  deadline.unref();

  let passed = false;
  try {
    env = await prepareEnvironment(log, services);
    if (options.faults) {
      const harness = new FaultHarness({
        env,
        random: new Random(options.seed + 4000),
        leaseMs: LEASE_SECONDS * 1000,
        clockBoundMs: clockSkewBoundMs({
          leaseSeconds: LEASE_SECONDS,
          leaseRenewalSeconds: LEASE_RENEWAL_SECONDS,
        }),
        plan: profile.faults,
        sabotage: options.sabotage,
        log,
      });
      faultMode = new FaultMode(options, harness);
      await harness.start();
    }
    // Without --faults, catalog writes still go through a proxy that only delays (and so reorders) them.
    const delayFigures = newS3FaultFigures();
    let delayEnv: NodeJS.ProcessEnv = {};
    if (faultMode === undefined) {
      delayProxy = new S3FaultProxy({
        upstream: env.endpoint,
        random: new Random(options.seed + 4500),
        weather: () => CALM_S3,
        figures: delayFigures,
        catalogDelay: () => catalogDelay(LEASE_SECONDS * 1000),
      });
      const url = await delayProxy.start();
      delayEnv = { AWS_ENDPOINT_URL: url, AWS_ENDPOINT_URL_S3: url };
      log(`catalog-delay proxy: S3 ${url}`);
    }
    /** Settings of an archiver; `throughProxies`: its clients go through the fault (or catalog-delay) proxies. */
    const workerEnv = (cutoff: Date, throughProxies = false): NodeJS.ProcessEnv => ({
      ...env!.baseEnv,
      ...(throughProxies ? (faultMode?.harness.clientEnv() ?? delayEnv) : {}),
      ARCHIVER_ELIGIBLE_BEFORE: cutoff.toISOString(),
      ARCHIVER_LEASE_SECONDS: String(LEASE_SECONDS),
      ARCHIVER_LEASE_RENEWAL_SECONDS: String(LEASE_RENEWAL_SECONDS),
      ARCHIVER_RETRY_SECONDS: "1",
      // Outages never count toward quarantine; a takeover of a killed worker's
      // lease does (the next worker cannot tell a kill from the bucket's own
      // memory or time running out), and kills land far more often here than
      // in production. Twelve: no healthy bucket is killed that often in a
      // row, while the poisoned bucket (soak/poison.ts), failing by its own
      // data every time, must end quarantined.
      ARCHIVER_MAX_ATTEMPTS: String(SOAK_MAX_ATTEMPTS),
      // Failures that are not plainly a bucket's own (timeouts, takeovers) quarantine only once
      // they lasted the span, on the database's clock; such a quarantine retries itself after
      // the cool-down. Seconds here, hours in production (faults/timeout-spikes.ts).
      ARCHIVER_QUARANTINE_SPAN_SECONDS: String(SOAK_QUARANTINE_SPAN_SECONDS),
      ARCHIVER_QUARANTINE_COOLDOWN_SECONDS: String(SOAK_QUARANTINE_COOLDOWN_SECONDS),
      ARCHIVER_INTERVAL_SECONDS: "1",
      ARCHIVER_WORKERS: String(profile.phasesPerProcess),
      // Small pages and batches: more fenced statements for a kill to land between.
      ARCHIVER_SNAPSHOT_PAGE_SIZE: "250",
      ARCHIVER_CLEANUP_BATCH_SIZE: "100",
    });
    const config = parseConfig(workerEnv(CUTOFF_FINAL), { cwd: REPO_ROOT });
    // The soak's own S3 client carries the emulator's credentials; the archivers get them by environment.
    runtime = await openAdapters(config, {
      migrate: true,
      objectStore: new S3ObjectStore({ bucket: env.s3Bucket, client: env.s3 }),
    });
    // The chaos clients (appenders, readers, GC, restores, the catalog reader): through the proxies.
    if (faultMode === undefined) {
      delayedClients = await openAdapters(
        parseConfig(workerEnv(CUTOFF_FINAL, true), { cwd: REPO_ROOT }),
        {
          objectStore: new S3ObjectStore({
            bucket: env.s3Bucket,
            endpoint: delayEnv.AWS_ENDPOINT_URL,
            forcePathStyle: true,
            region: env.region,
            clientConfig: { credentials: env.credentials },
          }),
        },
      );
    }
    const clients =
      faultMode === undefined
        ? delayedClients!
        : await faultMode.openClients(workerEnv(CUTOFF_FINAL, true), REPO_ROOT);
    const catalog = buildCatalog(profile);
    const ledger = new Ledger(catalog.strategies, path.join(workDir, "ledger.jsonl"));

    const seedStarted = Date.now();
    await seed(runtime.hotStore, catalog, profile, ledger, random, () => new Date());
    const seedSeconds = (Date.now() - seedStarted) / 1000;
    log(
      `seeded ${ledger.records} records into ${catalog.buckets.length} buckets of ${catalog.tables.length} tables in ${seedSeconds.toFixed(1)}s`,
    );

    // The monthly JSON table expires its oldest buckets, its expiry window altered during the chaos.
    const expiry = new ExpiryChaos({ catalog, policies: runtime.hotStore, admin: env.admin, log });

    // One bucket fails by its own data every time: it must end quarantined, and no other may.
    // Not in a partition that may expire: a quarantined bucket never reaches the archive, so
    // it could never expire, and the erasures beside expiry leave the poisoned partition alone.
    const expiring = new Set(
      catalog.buckets
        .filter((b) => expiry.mayExpire(b))
        .map((b) => partitionRef(b.tableId, b.partitionKey)),
    );
    const poisoned = await poisonOneBucket(
      env.admin,
      catalog,
      new Random(options.seed + 8000),
      (b) => expiring.has(partitionRef(b.tableId, b.partitionKey)),
    );
    log(`poisoned ${poisoned.ref}: it must end quarantined after ${SOAK_MAX_ATTEMPTS} attempts`);

    // Two daily tables get rolling hot windows, one of them altered during the chaos (soak/policy.ts).
    const policy = new PolicyChaos({ policies: runtime.hotStore, admin: env.admin, log });
    await policy.install();
    await expiry.install();
    // Partitions are erased over ranges that split buckets during the chaos (soak/erasure.ts).
    const erasure = new ErasureChaos({
      catalog,
      ledger,
      exclude: (b) => b.ref === poisoned.ref,
      mayExpire: (b) => expiry.mayExpire(b),
      log,
    });

    const monitor = new MetadataMonitor(env.admin);
    monitor.exempt(poisoned.ref);
    await monitor.refresh();
    void monitor.run(stop.signal);
    mix = new FeatureMix({
      profile,
      seed: options.seed,
      runtime: clients,
      cleanRuntime: runtime,
      poisoned,
      gcStore: faultMode?.gcStore() ?? clients.objectStore,
      admin: env.admin,
      catalog,
      monitor,
      ledger,
      leaseMs: LEASE_SECONDS * 1000,
      sabotaged: faultMode?.sabotaged === true,
      log,
    });
    const tracker = mix.tracker;

    const chaosStarted = Date.now();
    // Load spikes on healthy big buckets (faults/timeout-spikes.ts): handed to every archiver.
    const spikes: SpikeWindow[] =
      faultMode === undefined
        ? []
        : planTimeoutSpikes(new Random(options.seed + 9000), chaosStarted, profile.chaosMinSeconds);
    const chaosElapsed = () => (Date.now() - chaosStarted) / 1000;
    // The cutoff moves forward during the first part of the chaos: restarted archivers see later ones.
    const currentCutoff = () => {
      const share = Math.min(1, chaosElapsed() / (profile.chaosMinSeconds * 0.6));
      const t = CUTOFF_START.getTime() + share * (CUTOFF_FINAL.getTime() - CUTOFF_START.getTime());
      return new Date(Math.floor(t));
    };
    fleet = new ArchiverFleet({
      processes: profile.workerProcesses,
      // Every archiver exports in parts of segmentRows: a bucket seeded larger ends multi-part (manifest v5).
      envFor: () => ({
        ...workerEnv(currentCutoff(), true),
        ...(spikes.length === 0 ? {} : spikesEnv({ windows: spikes, spare: [poisoned.ref] })),
        ARCHIVER_SEGMENT_ROWS: String(profile.mix.segmentRows),
      }),
      argsFor: faultMode && (() => faultMode!.harness.archiverArgs()),
      logDir: workDir,
      log,
    });
    fleet.start();

    const appendStop = new AbortController();
    const appendFigures = newAppendFigures();
    const appenders = Array.from({ length: profile.appenders }, (_, i) =>
      runAppender({
        name: `a${i}`,
        hot: clients.hotStore,
        restores: tracker,
        avoid: (b) => erasure.avoid(b) || (faultMode?.avoid(b.ref, tracker) ?? false),
        catalog,
        ledger,
        monitor,
        random: new Random(options.seed + 1000 + i),
        figures: appendFigures,
        signal: AbortSignal.any([appendStop.signal, stop.signal]),
      }),
    );
    const readStop = new AbortController();
    const readFigures = newReadFigures();
    const readers = Array.from({ length: profile.readers }, (_, i) =>
      runReader({
        durable: new DurableTable({
          hotStore: clients.hotStore,
          objectStore: clients.objectStore,
          clock: systemClock,
          archivePrefix: clients.archivePrefix,
        }),
        hot: clients.hotStore,
        restores: tracker,
        catalog,
        ledger,
        random: new Random(options.seed + 2000 + i),
        figures: readFigures,
        signal: AbortSignal.any([readStop.signal, stop.signal]),
        log,
      }),
    );
    const sabotageDone = sabotage({
      kind: options.sabotage,
      env,
      catalog,
      ledger,
      monitor,
      random: new Random(options.seed + 3000),
      signal: stop.signal,
      log,
    }).catch((error: unknown) => `sabotage failed: ${(error as Error).message}`);

    const plan = profile.faults;
    const maintenance = mix.maintenance;
    faultMode?.start();
    // Restores, quarantines and drops stop once their goals are met late in the chaos, so the
    // fleet can drain; the sabotage restores throughout the minimum chaos, each restore a
    // chance for its race.
    mix.start(
      () =>
        faultMode?.sabotaged === true
          ? chaosElapsed() < profile.chaosMinSeconds
          : !(mix!.goalsMet() && chaosElapsed() >= profile.chaosMinSeconds * 0.7),
      // Scrub races and quarantines leave buckets that may expire to expiry; restores race it.
      (b) =>
        b.descriptor.end.getTime() <= currentCutoff().getTime() &&
        policy.eligible(b) &&
        !expiry.mayExpire(b) &&
        !erasure.avoid(b),
    );
    const policyDone = policy.run({
      chaosPolicies: clients.hotStore,
      release: runtime.hotStore,
      random: new Random(options.seed + 9500),
      gapMs: [profile.mix.policyGapSeconds[0] * 1000, profile.mix.policyGapSeconds[1] * 1000],
      until: () => chaosElapsed() >= profile.chaosMinSeconds * 0.7,
      signal: stop.signal,
    });
    const erasureDone = erasure.run({
      ctx: clients.context(silentLog),
      random: new Random(options.seed + 9900),
      gapMs: [profile.mix.erasureGapSeconds[0] * 1000, profile.mix.erasureGapSeconds[1] * 1000],
      until: () => chaosElapsed() >= profile.chaosMinSeconds * 0.8,
      signal: stop.signal,
    });
    const expiryDone = expiry.run({
      chaosPolicies: clients.hotStore,
      last: runtime.hotStore,
      random: new Random(options.seed + 9700),
      gapMs: [profile.mix.policyGapSeconds[0] * 1000, profile.mix.policyGapSeconds[1] * 1000],
      until: () => chaosElapsed() >= profile.chaosMinSeconds * 0.7,
      signal: stop.signal,
    });
    /** The fault goals of the profile, met so far (always with --faults off). */
    const faultGoalsMet = () => {
      if (faultMode === undefined) return true;
      const h = faultMode.harness;
      return (
        h.s3Faults >= plan.minS3Faults &&
        (h.restarts >= plan.minDbRestarts || !h.restartsPossible) &&
        h.skewedProcesses >= plan.minSkewedProcesses &&
        // Clocks days off refused to run, and cutoffs far ahead took part in the chaos.
        (fleet?.figures.clockRefusals ?? 0) >= 1 &&
        h.cutoffsAheadProcesses >= 1 &&
        (h.pageTerminations >= plan.minPageTerminations || !h.restartsPossible)
      );
    };

    const progress = setInterval(() => {
      log(
        `chaos: ${fleet!.figures.kills} kills, ${monitor.pending(CUTOFF_FINAL)} eligible buckets pending ` +
          `(cutoff now ${currentCutoff().toISOString().slice(0, 16)}), ` +
          `${monitor.count((b) => b.state === "archived")} archived, ${appendFigures.committed} appends committed / ` +
          `${appendFigures.rejected} fenced off, ${readFigures.partitionReads} partition reads, ` +
          `${readFigures.wrongTierReads} wrong-tier, ${monitor.expiredLeases} expired leases; ` +
          `${maintenance.gcRuns} GC runs (${maintenance.longGcPasses} long, ${maintenance.gcDeleted} deleted), ` +
          `${maintenance.restores} restores (${maintenance.formatSwitches} format switches), ` +
          `${mix!.operator.figures.quarantineRetries} quarantines retried, ${mix!.operator.figures.tableDrops} tables dropped, ` +
          `${mix!.catalogFigures.checks} catalog checks (${mix!.catalogFigures.mismatches} mismatches)` +
          (faultMode === undefined
            ? ""
            : `; faults: ${faultMode.harness.weather.current.spell} weather, ${faultMode.harness.s3Faults} S3 faults, ` +
              `${faultMode.harness.restarts} restarts`),
      );
    }, 15_000);

    let graceLogged = false;
    await fleet.chaos(
      random,
      profile.killGapSeconds,
      () => {
        const t = chaosElapsed();
        if (t >= profile.chaosMaxSeconds + profile.chaosGraceSeconds) return true;
        if (t >= profile.chaosMaxSeconds) {
          // Past the cap only activity goals may keep the chaos going (a loaded machine runs fewer).
          const lagging = !mix!.goalsMet(true) || !faultGoalsMet();
          if (lagging && !graceLogged) {
            graceLogged = true;
            log(
              `chaos cap reached with goals lagging; going on for at most ${profile.chaosGraceSeconds}s`,
            );
          }
          return !lagging;
        }
        return (
          fleet!.figures.kills >= profile.minKills &&
          t >= profile.chaosMinSeconds &&
          faultGoalsMet() &&
          mix!.goalsMet() &&
          monitor.pending(CUTOFF_FINAL) === 0
        );
      },
      stop.signal,
    );
    clearInterval(progress);
    // The windows are removed before the final runs, so the fleet drains to the final cutoff.
    await policyDone;
    await expiryDone;
    await erasureDone;
    const chaosSeconds = chaosElapsed();
    log(
      `chaos over after ${chaosSeconds.toFixed(0)}s and ${fleet.figures.kills} kills; stopping appenders and archivers`,
    );
    appendStop.abort();
    await Promise.all(appenders);
    await fleet.stop();
    await mix.stop();
    await faultMode?.windDown();
    await delayProxy?.settle();
    await mix.finish(runtime, log);
    const sabotaged = await Promise.race([sabotageDone, Promise.resolve("not done")]);

    // Leases of the killed archivers must expire before a clean run can take them over.
    await sleep((LEASE_SECONDS + 1) * 1000, stop.signal);
    const finalLogs: string[] = [];
    let finalRuns = 0;
    let finalFailures = 0;
    for (; finalRuns < FINAL_RUNS;) {
      await monitor.refresh();
      if (
        finalRuns > 0 &&
        monitor.pending(CUTOFF_FINAL) === 0 &&
        (await expiry.outstanding()) === 0 &&
        monitor.states.get(poisoned.ref)?.quarantined === true
      )
        break;
      finalRuns++;
      // A quarantine retrying itself is lifted by the run's discovery once its cool-down passed.
      const waited = await awaitCooledQuarantines(env.admin, 90_000, stop.signal);
      if (waited > 0) log(`waited ${waited} ms for quarantines to reach their retry time`);
      const logFile = path.join(workDir, `final-${finalRuns}.log`);
      finalLogs.push(logFile);
      const code = await runOnce(
        {
          ...workerEnv(CUTOFF_FINAL),
          ARCHIVER_WORKERS: "4",
          ARCHIVER_SEGMENT_ROWS: String(profile.mix.segmentRows),
        },
        logFile,
        (c) => (finalChild = c),
      );
      log(`final archive --once #${finalRuns} exited with ${code} (log ${logFile})`);
      if (code !== 0) finalFailures++;
      await monitor.refresh();
      // The poisoned bucket must end quarantined: one lifted to retry itself is settled by a further run.
      const poisonSettled = monitor.states.get(poisoned.ref)?.quarantined === true;
      if (
        monitor.pending(CUTOFF_FINAL) === 0 &&
        (await expiry.outstanding()) === 0 &&
        poisonSettled
      )
        break;
      await mix.operator.removeLeftoverProbes();
      await sleep((LEASE_SECONDS + 1) * 1000, stop.signal);
    }
    // Jobs a fault stopped or that waited for a bucket in flight finish now, then each is proven.
    await erasure.finish({ ...runtime.context(silentLog), clock: systemClock }, 180_000);
    readStop.abort();
    await Promise.all(readers);
    const catalogGoal = profile.mix.minCatalogChecks;
    if (mix.catalogFigures.checks < catalogGoal) {
      log(
        `catalog reader at ${mix.catalogFigures.checks} of ${catalogGoal} checks; ` +
          `going on for at most ${profile.catalogGraceSeconds}s`,
      );
      const until = Date.now() + profile.catalogGraceSeconds * 1000;
      while (mix.catalogFigures.checks < catalogGoal && Date.now() < until) {
        await sleep(1000, stop.signal);
      }
    }
    await mix.stopReader();

    log("end check: every bucket, manifest and committed record");
    const checkStarted = Date.now();
    const check: EndCheck = await runEndCheck({
      runtime,
      admin: env.admin,
      ledger,
      cutoff: CUTOFF_FINAL,
      concurrency: 4,
      restored: maintenance.restored,
      quarantinedByDesign: new Set([poisoned.ref]),
      expectedExpired: (b) => expiry.expectedExpired(b),
      erased: erasure.erased,
    });
    const quarantines = await checkQuarantines(env.admin, poisoned);
    for (const e of quarantines.examples) log(`healthy bucket quarantined: ${e}`);
    if (!quarantines.poisonQuarantined)
      log(`problem: the poisoned bucket ${poisoned.ref} did not end quarantined`);
    // Every table through the catalog, on the clean runtime, once everything is quiet.
    const catalogLines = await finalCatalogCheck({
      ports: runtime,
      admin: env.admin,
      catalog,
      ledger,
      figures: mix.catalogFigures,
      log,
    });
    for (const line of catalogLines) log(`catalog: ${line}`);
    const { rows: partRows } = await env.admin.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM ${METADATA_TABLE} WHERE state = 'archived' AND payload_parts > 1`,
    );
    const multipartRecorded = Number(partRows[0]?.n ?? 0);
    // Nothing damages an archive in the soak (but a sabotage): any corruption mark is false.
    const { rows: markRows } = await env.admin.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM ${METADATA_TABLE} WHERE corrupt_at IS NOT NULL`,
    );
    const corruptMarks = Number(markRows[0]?.n ?? 0);
    const checkSeconds = (Date.now() - checkStarted) / 1000;
    for (const p of check.problems) log(`problem: ${p}`);
    for (const e of readFigures.examples) log(`read: ${e}`);
    for (const e of mix.catalogFigures.examples) log(`catalog: ${e}`);
    for (const e of mix.operator.figures.examples) log(`operator: ${e}`);
    for (const e of appendFigures.errorExamples) log(`append error: ${e}`);
    for (const e of fleet.figures.unexpectedExitDetails.slice(0, 5)) log(`archiver: ${e}`);

    const outcomes = tallyOutcomes([...fleet.logFiles, ...finalLogs]);
    const spikedPages = tallySpikedPages(fleet.logFiles);
    const converged =
      check.unconverged === 0 &&
      check.badManifests === 0 &&
      check.buckets >= catalog.buckets.length;
    const faultFigures = faultMode?.harness.figures();
    const catalogFigures = mix.catalogFigures;
    const multipartGoal = Math.ceil(profile.mix.minMultipartShare * check.buckets);
    const mixCounters = {
      multipart_buckets: check.multipartBuckets,
      catalog_checks: catalogFigures.checks,
      long_gc_passes: maintenance.longGcPasses,
      format_switches: maintenance.formatSwitches,
      quarantine_retries: mix.operator.figures.quarantineRetries,
      scrub_runs: maintenance.scrubRuns,
    };
    const missedGoals = [
      ...Object.entries(mixCounters)
        .filter(([, n]) => n === 0)
        .map(([k]) => `${k} is 0`),
      ...(check.multipartBuckets < multipartGoal
        ? [
            `multipart_buckets ${check.multipartBuckets} < ${multipartGoal} (${profile.mix.minMultipartShare * 100}% of buckets)`,
          ]
        : []),
      ...(mix.goalsMet() ? [] : ["the mix's goals (see mix_details) were not met"]),
      ...(faultGoalsMet() ? [] : ["the fault goals were not met"]),
      ...(spikes.length === 0 || spikedPages > 0
        ? []
        : ["timeout_spiked_pages is 0: no spike met a big bucket's export"]),
      ...(policy.figures.changes >= profile.mix.minPolicyChanges
        ? []
        : [`policy_changes ${policy.figures.changes} < ${profile.mix.minPolicyChanges}`]),
      ...(expiry.figures.changes >= profile.mix.minPolicyChanges
        ? []
        : [`expiry_changes ${expiry.figures.changes} < ${profile.mix.minPolicyChanges}`]),
      ...(check.expiredBuckets > 0 ? [] : ["expired_buckets is 0"]),
      ...(erasure.figures.jobs >= profile.mix.minErasures
        ? []
        : [`erasures ${erasure.figures.jobs} < ${profile.mix.minErasures}`]),
      ...(erasure.figures.besideExpiry >= 1 ? [] : ["erasures_beside_expiry is 0"]),
    ];
    for (const m of missedGoals) log(`goal missed: ${m}`);
    passed =
      converged &&
      missedGoals.length === 0 &&
      catalogFigures.mismatches === 0 &&
      (corruptMarks === 0 || options.sabotage !== "none") &&
      mix.operator.probesLeft === 0 &&
      check.restoredNotRearchived === 0 &&
      check.lost === 0 &&
      check.duplicated === 0 &&
      readFigures.wrongTierReads === 0 &&
      check.phantom === 0 &&
      check.valueMismatches === 0 &&
      quarantines.poisonQuarantined &&
      quarantines.healthyQuarantined === 0 &&
      mix.scrubRaces.violations === 0 &&
      policy.figures.violations === 0 &&
      expiry.figures.violations === 0 &&
      check.expiryProblems === 0 &&
      check.erasedRecordsFound === 0 &&
      erasure.figures.proofProblems === 0 &&
      appendFigures.acceptedAfterFence === 0 &&
      fleet.figures.kills >= profile.minKills;
    Object.assign(figures, {
      buckets: check.buckets,
      kills: fleet.figures.kills,
      records: ledger.records,
      lost: check.lost,
      duplicated: check.duplicated,
      wrong_tier_reads: readFigures.wrongTierReads,
      s3_faults: faultFigures?.s3Faults ?? 0,
      db_restarts: faultFigures?.dbRestarts ?? 0,
      skewed_processes: faultFigures?.skewedProcesses ?? 0,
      cutoffs_ahead_processes: faultFigures?.cutoffsAheadProcesses ?? 0,
      clock_off_starts: faultFigures?.clockOffStarts ?? 0,
      clock_refusals: fleet.figures.clockRefusals,
      gc_runs: maintenance.gcRuns,
      gc_deleted: maintenance.gcDeleted,
      restores: maintenance.restores,
      ...mixCounters,
      catalog_mismatches: catalogFigures.mismatches,
      corrupt_marks: corruptMarks,
      scrub_races: mix.scrubRaces.races,
      scrub_race_violations: mix.scrubRaces.violations,
      policy_changes: policy.figures.changes,
      policy_change_errors: policy.figures.changeErrors,
      policy_checks: policy.figures.checks,
      policy_violations: policy.figures.violations,
      expiry_changes: expiry.figures.changes,
      expiry_change_errors: expiry.figures.changeErrors,
      expiry_violations: expiry.figures.violations,
      expiry_examples: expiry.figures.examples.length === 0 ? undefined : expiry.figures.examples,
      expired_buckets: check.expiredBuckets,
      expired_records: check.expiredRecords,
      expiry_problems: check.expiryProblems,
      expired_bucket_reads: readFigures.expiredBucketReads,
      erasures: erasure.figures.jobs,
      erasures_beside_expiry: erasure.figures.besideExpiry,
      erasure_runs: erasure.figures.runs,
      erasure_run_errors: erasure.figures.runErrors,
      erasure_pending_runs: erasure.figures.pendingRuns,
      erased_records: erasure.figures.ledgerErased,
      erased_records_receipts: erasure.figures.receiptRemoved,
      erased_records_found: check.erasedRecordsFound,
      erasures_proven: erasure.figures.proven,
      erasure_proof_problems: erasure.figures.proofProblems,
      erasure_examples:
        erasure.figures.examples.length === 0 ? undefined : erasure.figures.examples,
      policy_examples: policy.figures.examples.length === 0 ? undefined : policy.figures.examples,
      poison_quarantined: quarantines.poisonQuarantined,
      healthy_quarantined: quarantines.healthyQuarantined,
      page_terminations: faultFigures?.pageTerminations ?? 0,
      timeout_spikes: spikes.length,
      timeout_spiked_pages: spikedPages,
      self_retrying_quarantines: tallySelfRetryingQuarantines([...fleet.logFiles, ...finalLogs]),
      missed_goals: missedGoals.length === 0 ? undefined : missedGoals,
      profile: profile.name,
      faults: options.faults,
      seed: options.seed,
      sabotage: options.sabotage,
      sabotaged:
        options.sabotage === "none"
          ? undefined
          : options.sabotage === "adopt-orphans"
            ? adoptionsSabotaged([...fleet.logFiles], faultMode!)
            : (sabotaged ?? "nothing found to sabotage"),
      converged,
      passed,
      eligible_buckets: check.eligibleBuckets,
      archived_buckets: check.archivedBuckets,
      multipart_buckets_recorded: multipartRecorded,
      catalog_tables: catalogLines,
      catalog_writes_delayed: faultMode === undefined ? delayFigures.catalogDelayed : undefined,
      unconverged_buckets: check.unconverged,
      manifests_verified: check.manifestsVerified,
      bad_manifests: check.badManifests,
      hot_rows_in_archived: check.hotRowsInArchived,
      archived_records: check.archivedRecords,
      hot_records: check.hotRecords,
      phantom_records: check.phantom,
      value_mismatches: check.valueMismatches,
      uncertain_records: ledger.uncertainRecords,
      min_kills: profile.minKills,
      archiver_processes: profile.workerProcesses,
      archiver_starts: fleet.figures.starts,
      unexpected_archiver_exits: fleet.figures.unexpectedExits,
      expired_leases_taken_over: monitor.expiredLeases,
      archiver_outcomes: outcomes,
      appends_committed: appendFigures.committed,
      appended_records: appendFigures.committedRecords,
      appends_fenced_off: appendFigures.rejected,
      appends_accepted_after_fence: appendFigures.acceptedAfterFence,
      appends_ambiguous: appendFigures.ambiguous,
      append_errors: appendFigures.otherErrors,
      partition_reads: readFigures.partitionReads,
      bucket_reads_checked: readFigures.bucketReads,
      fenced_bucket_reads: readFigures.fencedBucketReads,
      archived_bucket_reads: readFigures.archivedBucketReads,
      read_errors: readFigures.readErrors,
      restored_not_rearchived: check.restoredNotRearchived,
      unfinished_restores: check.unfinishedRestores,
      mix_details: mix.report(),
      fault_details: faultMode?.report(),
      final_runs: finalRuns,
      final_run_failures: finalFailures,
      seconds: {
        seed: round(seedSeconds),
        chaos: round(chaosSeconds),
        end_check: round(checkSeconds),
        total: 0,
      },
    });
    await ledger.close();
  } catch (error) {
    log(`soak failed: ${(error as Error).stack ?? String(error)}`);
    passed = false;
    figures.converged = false;
    figures.error = (error as Error).message;
  } finally {
    clearTimeout(deadline);
    await cleanup(options.keep || !passed);
    process.off("SIGINT", interrupt);
    process.off("SIGTERM", interrupt);
    process.off("uncaughtException", crash);
    process.off("unhandledRejection", onUnhandledRejection);
    process.off("rejectionHandled", onRejectionHandled);
  }
  if (passed && !options.keep) rmSync(workDir, { recursive: true, force: true });
  else log(`work folder kept: ${workDir} (archiver logs, ledger.jsonl)`);
  if (typeof figures.seconds === "object" && figures.seconds !== null)
    (figures.seconds as Record<string, number>).total = round(elapsed());
  console.log(JSON.stringify(figures));
  return passed ? 0 : 1;
}

/** What the adopt-orphans sabotage did: adoptions the archivers logged, GC deletes that landed late. */
function adoptionsSabotaged(logFiles: readonly string[], faultMode: FaultMode): string {
  let adoptions = 0;
  for (const file of logFiles) {
    try {
      adoptions += readFileSync(file, "utf8").split("SABOTAGE adopted").length - 1;
    } catch {
      // a log that was never written
    }
  }
  const late = faultMode.harness.figures().report.gc_deletes_landed_late;
  return `adopt-orphans: ${adoptions} existing payload objects adopted by a later attempt; ${String(late)} GC deletes landed after their client gave up`;
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

// Exit once the result is printed (stdout is synchronous on Linux, to a file or a pipe): a full
// fault soak once kept spinning after its passed result, its main thread busy with no system
// call (a promise loop that never yields), and the event loop would never drain.
process.exit(await main(process.argv.slice(2)));
