/**
 * Appender loops: keep writing while the archivers are being killed. A third
 * of the appends go to buckets that never become eligible (they must stay
 * hot and complete); most of the rest race the fence on eligible buckets
 * that are still hot, and some aim at buckets already archiving or archived,
 * which must refuse them with BucketNotWritableError. One append in ten
 * spans two buckets, so a refusal must take the whole batch with it. An
 * append accepted by a bucket last seen archived is a fence failure, unless a
 * restore of that bucket ran since it was seen (it is hot again then).
 */
import { BucketNotWritableError, errorMessage } from "../src/errors.js";
import type { HotStore } from "../src/ports/hot-store.js";
import type { Ledger } from "./ledger.js";
import type { RestoreTracker } from "./maintenance.js";
import type { MetadataMonitor } from "./monitor.js";
import type { Random } from "./random.js";
import { sleep } from "./random.js";
import { isAmbiguous, RecordFactory, type Catalog, type SoakBucket } from "./workload.js";

export interface AppendFigures {
  committed: number;
  committedRecords: number;
  /** Refused by the fence: BucketNotWritableError. */
  rejected: number;
  /** Committed although the bucket had been seen archived before the append began. */
  acceptedAfterFence: number;
  ambiguous: number;
  otherErrors: number;
  errorExamples: string[];
}

export function newAppendFigures(): AppendFigures {
  return {
    committed: 0,
    committedRecords: 0,
    rejected: 0,
    acceptedAfterFence: 0,
    ambiguous: 0,
    otherErrors: 0,
    errorExamples: [],
  };
}

export async function runAppender(options: {
  name: string;
  hot: HotStore;
  catalog: Catalog;
  ledger: Ledger;
  monitor: MetadataMonitor;
  random: Random;
  figures: AppendFigures;
  signal: AbortSignal;
  /** Restores running in the soak: a bucket seen archived may be hot again since. */
  restores?: RestoreTracker;
  /** Leave these buckets alone for now (a sabotage that needs them unchanged). */
  avoid?: (bucket: SoakBucket) => boolean;
}): Promise<void> {
  const { hot, catalog, ledger, monitor, random, figures, signal } = options;
  const avoid = options.avoid ?? (() => false);
  const factory = new RecordFactory(options.name, random);
  const future = catalog.buckets.filter((b) => !b.eligible);
  const eligible = catalog.buckets.filter((b) => b.eligible);

  const stateOf = (b: SoakBucket) => monitor.states.get(b.ref)?.state ?? "hot";
  const pickEligible = (wantHot: boolean): SoakBucket => {
    for (let i = 0; i < 20; i++) {
      const b = random.pick(eligible);
      if ((stateOf(b) === "hot") === wantHot) return b;
    }
    return random.pick(eligible);
  };

  while (!signal.aborted) {
    const roll = random.next();
    const first =
      roll < 0.35 ? random.pick(future) : roll < 0.8 ? pickEligible(true) : pickEligible(false);
    const targets = [first];
    if (random.chance(0.1)) {
      const sameTable = catalog.buckets.filter((b) => b.tableId === first.tableId && b !== first);
      targets.push(random.pick(sameTable));
    }
    if (targets.some(avoid)) {
      await sleep(random.between(10, 50), signal);
      continue;
    }
    const seenAt = monitor.takenAt;
    const seenArchived = targets.filter((b) => stateOf(b) === "archived");
    const records = targets.flatMap((b) => factory.make(b, random.int(1, 8)));
    try {
      await ledger.track(
        first.tableId,
        records,
        () => hot.append(first.tableId, records, new Date()),
        isAmbiguous,
      );
      figures.committed++;
      figures.committedRecords += records.length;
      // Seen archived and no restore since: nothing could have made the bucket writable.
      if (seenArchived.some((b) => !options.restores?.touchedSince(b.ref, seenAt)))
        figures.acceptedAfterFence++;
    } catch (error) {
      if (error instanceof BucketNotWritableError) {
        figures.rejected++;
      } else {
        if (isAmbiguous(error)) figures.ambiguous++;
        else figures.otherErrors++;
        if (figures.errorExamples.length < 5) figures.errorExamples.push(errorMessage(error));
      }
    }
    await sleep(random.between(10, 50), signal);
  }
}
