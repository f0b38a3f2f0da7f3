/**
 * The hot store contract, run against every adapter: PGlite in the unit
 * suite, real PostgreSQL in the integration suite. Each test states one
 * property of src/ports/hot-store.ts.
 *
 * Tests share one store per suite (opening PGlite takes seconds) and isolate
 * themselves with unique table ids. Discovery sees every table, so its tests
 * run on a store of their own and retire their buckets afterwards (see
 * {@link retireEverything}).
 */
import { afterAll, beforeAll, describe } from "vitest";
import type { HotStore } from "../../src/ports/hot-store.js";
import { appendConformance } from "./hot-store/append.js";
import { discoveryConformance } from "./hot-store/discovery.js";
import { expiryConformance } from "./hot-store/expiry.js";
import { failureRunConformance } from "./hot-store/failure-runs.js";
import { leaseConformance } from "./hot-store/leases.js";
import { partConformance } from "./hot-store/parts.js";
import { phaseConformance } from "./hot-store/phases.js";
import { policyConformance } from "./hot-store/policies.js";
import { registryConformance } from "./hot-store/registry.js";
import { restoreConformance } from "./hot-store/restore.js";
import { scrubStoreConformance } from "./hot-store/scrub-store.js";
import { OPEN_TIMEOUT_MS, type OpenedHotStore } from "./hot-store/support.js";

export type { OpenedHotStore } from "./hot-store/support.js";
export { sqlHotStoreConformance, typedPlaceholderConformance } from "./hot-store/sql-adapter.js";
export { snapshotStatementConformance } from "./hot-store/snapshot-statement.js";

export function hotStoreConformance(name: string, open: () => Promise<OpenedHotStore>): void {
  describe(`hot store conformance: ${name}`, () => {
    let store: HotStore;
    let cleanup: () => Promise<void>;

    beforeAll(async () => {
      ({ store, cleanup } = await open());
      await store.migrate();
    }, OPEN_TIMEOUT_MS);

    afterAll(async () => {
      await cleanup?.();
    });

    registryConformance(() => store);
    policyConformance(() => store);
    appendConformance(() => store);
    leaseConformance(() => store);
    phaseConformance(() => store);
    partConformance(() => store);
    restoreConformance(() => store);
    scrubStoreConformance(() => store);
    expiryConformance(() => store);
  });

  discoveryConformance(name, open);
  failureRunConformance(name, open);
}
