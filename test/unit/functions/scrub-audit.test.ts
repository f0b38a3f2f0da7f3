/**
 * The scrub checks the audit trail's hash chain on every run: an intact
 * chain logs its head (a copy outside the database), a chain broken out of
 * band is an error line naming the first record and metric AuditTrailBroken
 * 1 (alarm AuditTrailTampered); an outage of the check raises nothing.
 */
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { METRIC } from "../../../functions/observability.js";
import type { SqlHotStore } from "../../../src/adapters/sql/sql-hot-store.js";
import { scheduledScrub } from "../../support/scrub-cases.js";
import { makeHarness, type Harness } from "../../support/workflow-harness.js";

function captureJsonLines() {
  const lines: Array<Record<string, unknown>> = [];
  const capture = (chunk: unknown) => {
    for (const l of String(chunk).split("\n")) {
      try {
        lines.push(JSON.parse(l) as Record<string, unknown>);
      } catch {
        // not a JSON line
      }
    }
    return true;
  };
  const spies = [
    vi.spyOn(process.stdout, "write").mockImplementation(capture),
    vi.spyOn(process.stderr, "write").mockImplementation(capture),
  ];
  return { lines, restore: () => spies.forEach((s) => s.mockRestore()) };
}

describe("the scrub's check of the audit trail", () => {
  let h: Harness;
  let output: ReturnType<typeof captureJsonLines>;
  const caller = { kind: "cli", osUser: "alice", host: "ops-1" } as const;
  const action = (name: string) => ({
    id: randomUUID(),
    action: name,
    target: "chat",
    tableId: "chat",
    caller,
    arguments: {},
  });
  const broken = () =>
    output.lines.map((l) => l[METRIC.AuditTrailBroken]).filter((v) => v !== undefined);

  beforeAll(async () => {
    h = await makeHarness();
    const restore = action("restore");
    await h.audit.begin(restore);
    await h.audit.conclude(restore, { outcome: "done", count: 1 });
    await h.audit.conclude(action("tables pause"), { outcome: "done" });
  }, 60_000);
  afterEach(() => output?.restore());
  afterAll(async () => {
    await h.close();
  });

  it("an intact chain: reported with its head, logged, metric 0", async () => {
    output = captureJsonLines();
    const report = await scheduledScrub(h);
    expect(report.audit).toMatchObject({ intact: true, records: 3, head_seq: 3, problem: null });
    expect(report.audit.head_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(output.lines).toContainEqual(
      expect.objectContaining({ message: "audit trail intact", head_hash: report.audit.head_hash }),
    );
    expect(broken()).toEqual([0]);
  });

  it("a record edited out of band: reported and logged as an error naming it, metric 1", async () => {
    const db = (h.inner as SqlHotStore).db;
    await db.query("UPDATE pulpitum_v4_audit SET outcome = 'refused' WHERE seq = 2");
    output = captureJsonLines();
    const report = await scheduledScrub(h);
    expect(report.audit).toMatchObject({ intact: false, records: 1 });
    expect(report.audit.problem).toMatch(
      /^altered: record #2 \(action [0-9a-f-]+, outcome, restore\)/,
    );
    expect(output.lines).toContainEqual(
      expect.objectContaining({ level: "ERROR", message: "audit trail changed out of band" }),
    );
    expect(broken()).toEqual([1]);
  });
});
