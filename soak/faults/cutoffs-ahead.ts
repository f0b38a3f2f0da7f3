/**
 * The `cutoffs-ahead` fault: an archiver that decides what is eligible and
 * what is due to expire as if its clock ran `aheadMs` ahead (days, or more
 * than every window), while its leases and retry times keep the host's
 * clock (such a process would refuse to start, and could take no lease:
 * usecases/clock-skew.ts, hot-store/leases.ts). Every cutoff it hands the
 * hot store (discovery, claim, the expiry mark) is its skewed one, so only
 * the statements' own cutoffs at the database's clock (hot-store/
 * database-cutoffs.ts) stand between it and archiving or expiring a bucket
 * early; the soak's policy, expiry and end checks count any that slips.
 */
import { expireCutoffAt } from "../../src/domain/table-policy.js";
import type { ExpiryDue } from "../../src/ports/bucket-expiry.js";
import type { ClaimCutoff, DiscoveryQuery, HotStore, Lease } from "../../src/ports/hot-store.js";
import { claimCutoff, cutoffsAt } from "../../src/usecases/eligibility.js";

export function cutoffsAhead(inner: HotStore, aheadMs: number): HotStore {
  const ahead = (at: Date) => new Date(at.getTime() + aheadMs);
  const skewedQuery = async (query: DiscoveryQuery): Promise<DiscoveryQuery> => ({
    ...query,
    ...cutoffsAt(await inner.listTables(), query.rule, ahead(query.now)),
  });
  const overrides: Partial<HotStore> = {
    discover: async (query) => await inner.discover(await skewedQuery(query)),
    peekCandidates: async (query) => await inner.peekCandidates(await skewedQuery(query)),
    claim: async (lease: Lease, now: Date, cutoff: ClaimCutoff) => {
      const table = await inner.getTable(lease.bucket.tableId);
      const skewed = claimCutoff(table, cutoff.rule, ahead(now));
      // The version the caller read stays the one the claim requires.
      return await inner.claim(lease, now, { ...skewed, policyVersion: cutoff.policyVersion });
    },
    beginExpiry: async (lease: Lease, now: Date, due: ExpiryDue) => {
      const table = await inner.getTable(lease.bucket.tableId);
      const expireCutoff = table === null ? null : expireCutoffAt(table, ahead(now));
      return await inner.beginExpiry(lease, now, {
        ...due,
        expireCutoff: expireCutoff ?? due.expireCutoff,
      });
    },
  };
  return new Proxy(inner, {
    get(target, property, receiver) {
      const override = overrides[property as keyof HotStore];
      if (override !== undefined) return override;
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === "function" ? (value as () => unknown).bind(target) : value;
    },
  });
}
