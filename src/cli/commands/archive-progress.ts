/**
 * The progress line of `archive --once` on a terminal: buckets finished of
 * those discovery would offer at the start (more found later raise the
 * total), rows and bytes archived, and the time left at the rate so far.
 * Nothing when stderr is not a terminal.
 */
import type { Adapters } from "../../open-adapters.js";
import { eligibilityAt } from "../../usecases/eligibility.js";
import { count, formatBytes } from "../format.js";
import { ProgressBar } from "../progress.js";
import type { ArchiveTotals } from "./archive.js";

/** Offered buckets counted for the total, at most (a larger backlog shows as "10000+"). */
const COUNTED = 10_000;

export class ArchiveProgress {
  readonly #bar: ProgressBar;
  #total: number;

  private constructor(bar: ProgressBar, total: number) {
    this.#bar = bar;
    this.#total = total;
  }

  /** The line for a `--once` run on a terminal, or null. */
  static async start(
    rt: Adapters,
    stream: NodeJS.WriteStream = process.stderr,
  ): Promise<ArchiveProgress | null> {
    if (stream.isTTY !== true) return null;
    const now = rt.clock.now();
    const { cutoffs } = await eligibilityAt(rt.hotStore, rt.config.cutoff, now);
    const offered = await rt.hotStore.peekCandidates({
      now,
      ...cutoffs,
      limit: COUNTED,
      enqueuedBefore: now,
    });
    const bar = new ProgressBar("archiving", offered.length, stream, { unit: " buckets" });
    return new ArchiveProgress(bar, offered.length);
  }

  /** Erase the line before other output. */
  clear(): void {
    this.#bar.clear();
  }

  /** Redraw with the run's totals: buckets archived, expired or failed count as done. */
  update(totals: ArchiveTotals, failed: number): void {
    const done = totals.buckets + totals.expired + failed;
    if (done > this.#total) {
      this.#total = done;
      this.#bar.setTotal(done);
    }
    this.#bar.update(
      done,
      `${count(totals.rows, "row")}, ${formatBytes(totals.bytes)}` +
        (failed > 0 ? `, ${failed} failed` : ""),
    );
  }

  finish(): void {
    this.#bar.finish();
  }
}
