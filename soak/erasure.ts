/**
 * Erasure under chaos (issue 44): during the chaos, partitions of the soak's
 * tables are erased over a range that splits two buckets (half of one, all
 * of the next, half of a third), through the chaos clients (faults, a
 * skewed clock) while the fleet archives, restores, GC and the scrub run and
 * readers read the same partitions. A job a fault stops is run again until
 * it is done; those left when the chaos ends are finished on the clean
 * runtime.
 *
 * Erasure beside expiry (issue 49): some jobs take a partition of the
 * expiring table over a range from its first bucket into one that never
 * expires, so a run meets buckets expired, marked for expiry (pending until
 * the expiry finishes) and live, in any order the chaos makes; every job
 * must still end done and proven.
 *
 * The ledger (soak/ledger.ts `erase`) stops owing the erased records once a
 * partition is chosen, and the partition's appenders leave it alone from
 * then on (an append racing the erasure is the integration suite's), so:
 * - every other record, of every key (the erased key's outside the range
 *   included), is held to the ledger as before: 0 lost, 0 duplicated;
 * - no erased record may be found anywhere at the end (the end check counts
 *   `erased_records_found`), and `verify --erasure`'s proof of each job
 *   (usecases/erase-proof.ts: hot rows, published payloads, catalog-listed
 *   objects) must hold.
 */
import { erasureStoreOf } from "../src/adapters/sql/erasure-store.js";
import { describeBucket } from "../src/domain/bucket.js";
import { errorMessage } from "../src/errors.js";
import type { ArchiverContext } from "../src/usecases/context.js";
import { eraseKey, type EraseRequest } from "../src/usecases/erase.js";
import { proveErasure, proveFinishedErasures } from "../src/usecases/erase-proof.js";
import type { ErasureStore } from "../src/ports/erasure-store.js";
import type { HotStore } from "../src/ports/hot-store.js";
import { partitionRef, type Ledger } from "./ledger.js";
import type { Random } from "./random.js";
import { atRandomGapsUntil, sleep } from "./random.js";
import type { Catalog, SoakBucket } from "./workload.js";

/** Partitions erased at most in one run. */
const MAX_JOBS = 8;

export interface ErasureFigures {
  /** Partitions chosen, job runs, runs a fault ended, runs that left buckets pending. */
  jobs: number;
  runs: number;
  runErrors: number;
  pendingRuns: number;
  /** Records the ledger stopped owing, and those the jobs' receipts say they removed. */
  ledgerErased: number;
  receiptRemoved: number;
  /** Jobs proven at the end, and their problems. */
  proven: number;
  proofProblems: number;
  /** Done jobs the scheduled scrub's path proved at the end (each once). */
  scrubProved: number;
  /** Jobs whose range holds buckets that may expire during the run. */
  besideExpiry: number;
  examples: string[];
}

interface Job {
  readonly request: EraseRequest;
  readonly ref: string;
  done: boolean;
  jobId: string | null;
}

export class ErasureChaos {
  readonly figures: ErasureFigures = {
    jobs: 0,
    runs: 0,
    runErrors: 0,
    pendingRuns: 0,
    ledgerErased: 0,
    receiptRemoved: 0,
    proven: 0,
    proofProblems: 0,
    scrubProved: 0,
    besideExpiry: 0,
    examples: [],
  };
  /** Partitions chosen: appenders leave them alone. */
  readonly #chosen = new Set<string>();
  readonly #jobs: Job[] = [];
  /** bucketRef#recordRef of every erased record: none may be found at the end. */
  readonly erased = new Set<string>();

  constructor(
    private readonly options: {
      readonly catalog: Catalog;
      readonly ledger: Ledger;
      /** Partitions another feature needs whole (the poisoned bucket's). */
      readonly exclude: (b: SoakBucket) => boolean;
      /** Buckets that may expire during the run: ordinary jobs leave their partitions alone. */
      readonly mayExpire: (b: SoakBucket) => boolean;
      readonly log: (line: string) => void;
    },
  ) {}

  /** Appenders leave a chosen partition alone from the moment it is chosen. */
  avoid(b: SoakBucket): boolean {
    return this.#chosen.has(partitionRef(b.tableId, b.partitionKey));
  }

  /** Choose partitions and run their jobs until `until()`. */
  async run(options: {
    readonly ctx: ArchiverContext;
    readonly random: Random;
    readonly gapMs: readonly [number, number];
    readonly until: () => boolean;
    readonly signal: AbortSignal;
  }): Promise<void> {
    const { random } = options;
    await atRandomGapsUntil(options, async () => {
      // A job waiting for buckets in flight does not hold up the next partition.
      const open = this.#jobs.filter((j) => !j.done);
      if (open.length > 0 && (this.#jobs.length >= MAX_JOBS || random.chance(0.5)))
        await this.#runJob(options.ctx, random.pick(open));
      else await this.#choose(random);
    });
  }

  /** After the chaos, on the clean runtime: finish every job, then prove each. */
  async finish(ctx: ArchiverContext, deadlineMs: number): Promise<void> {
    const until = Date.now() + deadlineMs;
    for (const job of this.#jobs) {
      while (!job.done && Date.now() < until) {
        await this.#runJob(ctx, job);
        if (!job.done) await sleep(1000);
      }
    }
    const store = storeOf(ctx);
    for (const job of this.#jobs) {
      if (!job.done || job.jobId === null) {
        this.#problem(`erasure of ${job.ref} did not finish`);
        continue;
      }
      const proof = await proveErasure(ctx, store, job.jobId);
      if (proof.proven) this.figures.proven++;
      for (const p of proof.problems)
        this.#problem(`proof of ${job.ref}: ${p.bucket_key}: ${p.problem}`);
    }
    // The scheduled scrub's proof (each done job once, its range cut at its finish) agrees.
    const scrubbed = await proveFinishedErasures(ctx, store);
    this.figures.scrubProved = scrubbed.jobs_proved;
    for (const proof of scrubbed.unproven)
      for (const p of proof.problems)
        this.#problem(`the scrub's proof of job ${proof.job_id}: ${p.bucket_key}: ${p.problem}`);
    // At least one job per partition done (a lost reply to the final status makes a rerun start another).
    const done = this.#jobs.filter((j) => j.done).length;
    if (scrubbed.jobs_proved < done)
      this.#problem(
        `the scrub proved ${scrubbed.jobs_proved} erasure jobs, fewer than the ${done} done`,
      );
    this.options.log(
      `erasure: ${this.figures.jobs} partitions erased in ${this.figures.runs} runs ` +
        `(${this.figures.runErrors} failed, ${this.figures.pendingRuns} left buckets pending), ` +
        `${this.figures.ledgerErased} records erased, ${this.figures.proven} proven (${this.figures.scrubProved} by the scrub's path), ${this.figures.proofProblems} proof problems; ` +
        `${this.figures.besideExpiry} beside expiry`,
    );
  }

  /** Pick a partition not chosen yet and a range splitting two of its buckets; the ledger forgets it. */
  async #choose(random: Random): Promise<void> {
    const { catalog, ledger } = this.options;
    const partitions = new Map<string, SoakBucket[]>();
    for (const b of catalog.buckets) {
      const ref = partitionRef(b.tableId, b.partitionKey);
      if (this.#chosen.has(ref)) continue;
      let list = partitions.get(ref);
      if (list === undefined) partitions.set(ref, (list = []));
      list.push(b);
    }
    const { exclude, mayExpire } = this.options;
    for (const [ref, list] of partitions) {
      list.sort((a, b) => a.descriptor.start.getTime() - b.descriptor.start.getTime());
      if (list.some(exclude)) partitions.delete(ref);
    }
    const mid = (b: SoakBucket) =>
      new Date((b.descriptor.start.getTime() + b.descriptor.end.getTime()) / 2);
    // Beside expiry: from the first bucket into the first one that never expires.
    const besideExpiry = [...partitions.entries()].filter(
      ([, list]) => list.some(mayExpire) && list.some((b) => !mayExpire(b)),
    );
    const ordinary = [...partitions.entries()].filter(
      ([, list]) => list.length >= 3 && !list.some(mayExpire),
    );
    const pickBeside =
      besideExpiry.length > 0 &&
      (ordinary.length === 0 ||
        this.figures.besideExpiry === 0 ||
        (this.figures.besideExpiry < 2 && random.chance(0.5)));
    if (!pickBeside && ordinary.length === 0) return;
    const [ref, list] = random.pick(pickBeside ? besideExpiry : ordinary);
    let from: Date;
    let to: Date;
    if (pickBeside) {
      from = list[0]!.descriptor.start;
      to = mid(list.find((b) => !mayExpire(b))!);
      this.figures.besideExpiry++;
    } else {
      const i = random.int(0, list.length - 3);
      from = mid(list[i]!);
      to = mid(list[i + 2]!);
    }
    const first = list[0]!;
    this.#chosen.add(ref);
    await ledger.settle(first.tableId, first.partitionKey);
    const micros = (d: Date) => BigInt(d.getTime()) * 1000n;
    const erased = ledger.erase(first.tableId, first.partitionKey, micros(from), micros(to));
    for (const r of erased) this.erased.add(r);
    this.figures.jobs++;
    this.figures.ledgerErased += erased.size;
    this.#jobs.push({
      ref: `${describeBucket({ tableId: first.tableId, partitionKey: first.partitionKey, bucketKey: "" })} ${from.toISOString()}..${to.toISOString()}`,
      request: {
        tableId: first.tableId,
        partitionKey: first.partitionKey,
        range: { from, to },
        requestedBy: "soak",
        dryRun: false,
      },
      done: false,
      jobId: null,
    });
  }

  async #runJob(ctx: ArchiverContext, job: Job): Promise<void> {
    this.figures.runs++;
    try {
      const report = await eraseKey(ctx, storeOf(ctx), job.request);
      job.jobId = report.job_id;
      if (report.status === "done") {
        job.done = true;
        this.figures.receiptRemoved += report.records_removed;
      } else {
        this.figures.pendingRuns++;
      }
    } catch (error) {
      this.figures.runErrors++;
      if (this.figures.runErrors <= 5)
        this.options.log(`erasure of ${job.ref} failed: ${errorMessage(error)}`);
    }
  }

  #problem(text: string): void {
    this.figures.proofProblems++;
    if (this.figures.examples.length < 10) this.figures.examples.push(text);
    this.options.log(`problem: ${text}`);
  }
}

function storeOf(ctx: ArchiverContext): ErasureStore {
  const store = erasureStoreOf(ctx.hotStore as HotStore);
  if (store === null) throw new Error("the soak's hot store is not SQL: it has no erasure jobs");
  return store;
}
