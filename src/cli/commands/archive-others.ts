/**
 * `archive --once` beside another archiver (two cron jobs that overlap):
 * when this run has nothing left it can advance but buckets are leased by
 * another process, it waits while that process is alive, then looks again.
 *
 * A live holder renews its lease every ARCHIVER_LEASE_RENEWAL_SECONDS and
 * moves the bucket on (a new generation at each phase, the lease released
 * at the end), so a lease whose expiry and generation stay the same for
 * longer than that, with a margin, belongs to a process that is gone
 * (`kill -9`): waiting for it would only wait for its expiry, and the run
 * ends naming it as before. Once every lease it watched is released, the
 * caller runs again (what the other left, or took and gave back, is
 * archived here), so a run exits 0 when the only leftovers were finished by
 * another live archiver. Process time only decides how long to wait here;
 * whether a lease is live is the database's lease expiry.
 */
import type { BucketId } from "../../domain/bucket.js";
import { showBucket } from "../../domain/display.js";
import type { Adapters } from "../../open-adapters.js";
import { count, formatDuration } from "../format.js";
import type { Leftovers } from "./archive-leftovers.js";

export type OthersOutcome =
  /** Every lease watched was released by its holder: look for work again. */
  | "released"
  /** A lease stayed unrenewed past the margin: its holder is gone. */
  | "stale"
  /** The run was stopped (Ctrl-C) while it waited. */
  | "interrupted";

export interface WaitOptions {
  readonly signal: AbortSignal;
  /** Told once when the wait starts, and which lease went stale if one does. */
  readonly say: (line: string) => void;
  /** How often the leases are read again. */
  readonly pollMs?: number;
  readonly sleep?: (ms: number) => Promise<void>;
}

/** How long a live holder may leave its lease unchanged: its renewal interval, and a margin for a slow renewal. */
export function staleAfterMs(renewalSeconds: number): number {
  return renewalSeconds * 1000 * 1.5 + 2000;
}

const keyOf = (id: BucketId) => showBucket(id);

export async function waitForOtherArchivers(
  rt: Adapters,
  leased: Leftovers["leased"],
  options: WaitOptions,
): Promise<OthersOutcome> {
  const staleAfter = staleAfterMs(rt.config.leaseRenewalSeconds);
  const pollMs = options.pollMs ?? 500;
  const sleep =
    options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const first = leased[0]!;
  options.say(
    `${count(leased.length, "bucket")} ${leased.length === 1 ? "is" : "are"} leased by another process ` +
      `(${showBucket(first.id)} at ${first.phase ?? "-"}${leased.length > 1 ? ", …" : ""}): waiting while it works on ` +
      `${leased.length === 1 ? "it" : "them"}; a lease it does not renew within ${formatDuration(staleAfter)} means that process is gone`,
  );
  const seen = new Map<string, { generation: number; expiresAt: number; since: number }>();
  for (;;) {
    if (options.signal.aborted) return "interrupted";
    const now = rt.clock.now().getTime();
    const watched = await Promise.all(leased.map((l) => rt.hotStore.getBucket(l.id)));
    let held = 0;
    for (const m of watched) {
      if (m === null || m.ownerToken === null || m.leaseExpiresAt === null) continue;
      if (m.leaseExpiresAt.getTime() <= now) continue;
      held++;
      const key = keyOf(m.id);
      const last = seen.get(key);
      const expiresAt = m.leaseExpiresAt.getTime();
      if (last === undefined || last.generation !== m.generation || last.expiresAt !== expiresAt) {
        seen.set(key, { generation: m.generation, expiresAt, since: now });
      } else if (now - last.since > staleAfter) {
        options.say(
          `the lease of ${showBucket(m.id)} (${m.phase}, generation ${m.generation}) was not renewed for ${formatDuration(now - last.since)}: its process is gone`,
        );
        return "stale";
      }
    }
    if (held === 0) return "released";
    await sleep(pollMs);
  }
}
