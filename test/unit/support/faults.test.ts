/**
 * The fault harness reaches every method of the hot store port: whatever
 * role a method belongs to, a failure point can be set on it, so no
 * operation of the workflow runs without one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqlHotStore } from "../../../src/adapters/sql/sql-hot-store.js";
import { TransientStoreError } from "../../../src/errors.js";
import { faultyHotStore, ProcessLife, type HotOperation } from "../../support/faults.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";

const NOT_OPERATIONS = new Set(["constructor", "migrate", "close"]);

/** Every method of the adapter (it implements HotStore, so every method of the port is here). */
const operations = Object.getOwnPropertyNames(SqlHotStore.prototype).filter(
  (name) => !NOT_OPERATIONS.has(name),
) as HotOperation[];

describe("the hot store fault harness", () => {
  let store: SqlHotStore;
  beforeAll(async () => {
    store = await freshPgliteHotStore();
  });
  afterAll(async () => {
    await store.close();
  });

  it.each(operations)("fails %s at a failure point before it takes effect", async (operation) => {
    const life = new ProcessLife();
    const faulty = faultyHotStore(store, life, { operation, when: "before", kind: "error" });

    const call = (faulty[operation] as () => Promise<unknown>)();

    await expect(call).rejects.toBeInstanceOf(TransientStoreError);
    await expect(call).rejects.toThrow(`injected failure at ${operation}:before`);
    expect(life.fired).toBe(1);
  });

  it("fails every call of a crashed process, whichever role the method belongs to", async () => {
    const life = new ProcessLife();
    const faulty = faultyHotStore(store, life, {
      operation: "listTables",
      when: "after",
      kind: "crash",
    });
    await expect(faulty.listTables()).rejects.toThrow("simulated crash at listTables:after");

    for (const operation of operations) {
      await expect((faulty[operation] as () => Promise<unknown>)()).rejects.toThrow(
        "process already dead",
      );
    }
  });
});
