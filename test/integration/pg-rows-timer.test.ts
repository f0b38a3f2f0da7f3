/**
 * A finished command exits at once on PostgreSQL: a read of binary rows
 * (every export's snapshot pages) leaves no client-side `query_timeout`
 * timer armed once it settles. Such a timer kept `pulpitum archive --once` and `npm start`
 * alive for the statement timeout plus the backstop (65 s) after their summary.
 */
import { createHook } from "node:async_hooks";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { PgDatabase } from "../../src/adapters/sql/database.js";
import { freshDatabase } from "../support/integration-resources.js";

/**
 * The timers created while `work` runs that are still armed once it settles.
 * Tracked by their own ids, so a timer of the test runner's that fires or is
 * armed meanwhile cannot make the count drift (a plain count of active
 * `Timeout` resources did, and failed CI once).
 */
async function timersLeftArmedBy(work: () => Promise<void>): Promise<number> {
  const armed = new Set<number>();
  const hook = createHook({
    init(id, type) {
      if (type === "Timeout") armed.add(id);
    },
    destroy(id) {
      armed.delete(id);
    },
  }).enable();
  try {
    await work();
    // destroy hooks of timers cleared in the last tick run on the next one
    await new Promise<void>((resolve) => setImmediate(resolve));
  } finally {
    hook.disable();
  }
  return armed.size;
}

describe("PostgreSQL binary rows and the client's query timeout", () => {
  let url: string;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ url, drop } = await freshDatabase(inject("databaseUrl")));
  });
  afterAll(async () => {
    await drop();
  });

  it("leaves no timer armed after a read of binary rows settles, with a statement timeout in force", async () => {
    const db = new PgDatabase(url, {
      timeouts: { connectMs: 5000, statementMs: 60_000, idleInTransactionMs: 0 },
    });
    const left = await timersLeftArmedBy(async () => {
      try {
        for (let i = 0; i < 3; i++) {
          const read = await db.readBinaryRows(
            "SELECT g AS n FROM generate_series(1, $1::INT8) AS g",
            [1000],
          );
          expect(read.rows).toBe(1000);
          expect(read.bytes.byteLength).toBe(1000 * (2 + 4 + 8));
        }
        await expect(db.readBinaryRows("SELECT 1/0 AS boom", [])).rejects.toThrow(
          /division by zero/,
        );
      } finally {
        await db.close();
      }
    });
    expect(left).toBe(0);
  });
});
