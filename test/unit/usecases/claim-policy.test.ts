/**
 * The claim takes its eligibility from the table as the phase read it with
 * the bucket, before the lease, and requires that policy version in its
 * statement. A window changed between that read and the claim must never be
 * applied with the old version: the claim is refused, the bucket stays hot
 * with every record, and the next run claims it under the new policy.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseDuration } from "../../../src/domain/duration.js";
import { parseTableId } from "../../../src/domain/table.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");

describe("a claim racing a policy change", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  it("is refused when the window changed after the bucket and its table were read, leaves the bucket hot, and the next run claims under the new version", async () => {
    const expected = await seedTable(h, TABLE, "CalendarMonthUtc", "json", chatRecords([3], 40));
    const { id, records } = [...expected.values()][0]!;
    const before = (await h.inner.getTable(TABLE))!.policyVersion;
    const { ctx, life } = h.process({
      hot: {
        operation: "claim",
        when: "before",
        kind: "hook",
        hook: async () => {
          await h.inner.alterTable(TABLE, { archiveAfter: parseDuration("1d") }, h.clock.now());
        },
      },
    });

    const raced = await runNextPhase(ctx, id);

    expect(life.fired).toBe(1);
    expect(raced).toMatchObject({ phase: "claim", result: "lease-lost" });
    expect(raced.reason).toMatch(
      new RegExp(
        `not eligible for the cutoff .* policy version ${before} \\(a changed window refuses it\\)`,
      ),
    );
    expect((await h.inner.getTable(TABLE))!.policyVersion).toBe(before + 1);
    // Not a failure of the bucket's: no attempt counted, no retry time, nothing suspect.
    expect(await h.inner.getBucket(id)).toMatchObject({
      state: "hot",
      phase: "claim",
      attempts: 0,
      retryAt: null,
      suspect: null,
    });
    expect(await h.inner.countHotRows(id)).toBe(records.length);

    const claimed = await runNextPhase(h.process().ctx, id);
    expect(claimed).toMatchObject({ phase: "claim", result: "advanced" });
    await converge(h, expected);
    await expectFullyArchived(h, expected);
  });
});
