import { describe, expect, it } from "vitest";
import { DEFAULT_CUTOFF_POLICY, fixedCutoff } from "../../../src/domain/cutoff.js";
import { formatDuration, parseDuration, subtractDuration } from "../../../src/domain/duration.js";
import type { TableDefinition, TableId } from "../../../src/domain/table.js";
import {
  archiveCutoffAt,
  cappedByGlobalCutoff,
  checkLifecycle,
  NO_LIFECYCLE,
  parseStorageClass,
} from "../../../src/domain/table-policy.js";
import { InvalidInputError } from "../../../src/errors.js";
import {
  claimCutoff,
  explainEligibility,
  tableWindows,
} from "../../../src/usecases/eligibility.js";

const NOW = new Date("2026-06-15T12:00:00.000Z");
const d = (text: string) => parseDuration(text);

function table(overrides: Partial<TableDefinition> = {}): TableDefinition {
  return {
    tableId: "events" as TableId,
    strategy: "CalendarDayUtc",
    format: "json",
    writableBuckets: null,
    paused: false,
    ...NO_LIFECYCLE,
    policyVersion: 4,
    policyChangedAt: NOW,
    ...overrides,
  };
}

describe("durations of table policies", () => {
  it("reads ISO 8601 durations and the short forms, and stores one ISO form", () => {
    expect(formatDuration(d("90d"))).toBe("P90D");
    expect(formatDuration(d("P90D"))).toBe("P90D");
    expect(formatDuration(d("12h"))).toBe("PT12H");
    expect(formatDuration(d("2y"))).toBe("P2Y");
    expect(formatDuration(d("2w"))).toBe("P14D");
    expect(formatDuration(d("p1y18m"))).toBe("P2Y6M");
    expect(formatDuration(d("PT1H30M"))).toBe("PT1H30M");
    expect(d("7y")).toEqual(d("P7Y"));
  });

  it("refuses what is not a duration, naming the accepted forms", () => {
    for (const bad of ["90", "90 days", "P", "PT", "-3d", "1.5y", "3q", ""]) {
      expect(() => parseDuration(bad, "--archive-after")).toThrow(InvalidInputError);
      expect(() => parseDuration(bad, "--archive-after")).toThrow(
        /--archive-after .* is not a duration.*ISO 8601 duration \(P90D.*short form \(90d, 12h/,
      );
    }
    expect(() => parseDuration("0d")).toThrow(/is zero/);
    expect(() => parseDuration("5000y")).toThrow(/longer than 1000 years/);
  });

  it("subtracts years and months on the calendar and days as fixed lengths", () => {
    expect(subtractDuration(NOW, d("90d")).toISOString()).toBe("2026-03-17T12:00:00.000Z");
    expect(subtractDuration(new Date("2028-02-29T00:00:00Z"), d("1y")).toISOString()).toBe(
      "2027-02-28T00:00:00.000Z",
    );
    expect(subtractDuration(NOW, d("12h")).toISOString()).toBe("2026-06-15T00:00:00.000Z");
  });
});

describe("storage classes", () => {
  it("accepts the classes read without a restore, in any case", () => {
    expect(parseStorageClass("standard_ia")).toBe("STANDARD_IA");
    expect(parseStorageClass("GLACIER_IR")).toBe("GLACIER_IR");
    expect(parseStorageClass("INTELLIGENT_TIERING")).toBe("INTELLIGENT_TIERING");
  });

  it("refuses classes that need a restore, and unknown names, listing the accepted ones", () => {
    expect(() => parseStorageClass("GLACIER", "--storage-class")).toThrow(
      /--storage-class "GLACIER": needs a restore.*expected STANDARD, STANDARD_IA, INTELLIGENT_TIERING, GLACIER_IR/,
    );
    expect(() => parseStorageClass("DEEP_ARCHIVE")).toThrow(/needs a restore/);
    expect(() => parseStorageClass("REDUCED")).toThrow(/is not a storage class/);
  });
});

describe("a table's lifecycle rules", () => {
  const day = { strategy: "CalendarDayUtc" as const, writableBuckets: null };

  it("accepts an expire_after longer than archive_after on every calendar", () => {
    expect(() =>
      checkLifecycle(day, { ...NO_LIFECYCLE, archiveAfter: d("90d"), expireAfter: d("7y") }),
    ).not.toThrow();
  });

  it("refuses expire_after without archive_after, or not longer than it on every calendar", () => {
    expect(() => checkLifecycle(day, { ...NO_LIFECYCLE, expireAfter: d("7y") })).toThrow(
      /without archive_after/,
    );
    expect(() =>
      checkLifecycle(day, { ...NO_LIFECYCLE, archiveAfter: d("1y"), expireAfter: d("366d") }),
    ).toThrow(/not longer than archive_after P1Y on every calendar/);
    expect(() =>
      checkLifecycle(day, { ...NO_LIFECYCLE, archiveAfter: d("90d"), expireAfter: d("90d") }),
    ).toThrow(InvalidInputError);
  });

  it("refuses an archive_after shorter than the ingestion guard keeps buckets writable", () => {
    const guarded = { strategy: "CalendarDayUtc" as const, writableBuckets: 8 };
    expect(() => checkLifecycle(guarded, { ...NO_LIFECYCLE, archiveAfter: d("6d") })).toThrow(
      /shorter than the ingestion guard.*at least 7 days/,
    );
    expect(() => checkLifecycle(guarded, { ...NO_LIFECYCLE, archiveAfter: d("7d") })).not.toThrow();
  });
});

describe("eligibility by table", () => {
  it("uses the global rule for a table without a window, exactly as before policies", () => {
    const t = table();
    expect(archiveCutoffAt(t, DEFAULT_CUTOFF_POLICY, NOW).toISOString()).toBe(
      "2025-01-01T00:00:00.000Z",
    );
    expect(tableWindows([t], DEFAULT_CUTOFF_POLICY, NOW)).toEqual([]);
    expect(explainEligibility(t, DEFAULT_CUTOFF_POLICY, NOW)).toMatchObject({
      rule: "global",
      cutoff: "2025-01-01T00:00:00.000Z",
    });
  });

  it("replaces the default rule with the table's window, evaluated at each `now`", () => {
    const t = table({ archiveAfter: d("90d") });
    expect(tableWindows([t], DEFAULT_CUTOFF_POLICY, NOW)).toEqual([
      {
        tableId: "events",
        policyVersion: 4,
        archiveCutoff: new Date("2026-03-17T12:00:00.000Z"),
        expireCutoff: null,
      },
    ]);
    const later = new Date("2026-06-16T12:00:00.000Z");
    expect(claimCutoff(t, DEFAULT_CUTOFF_POLICY, later)).toEqual({
      cutoff: new Date("2026-03-18T12:00:00.000Z"),
      rule: DEFAULT_CUTOFF_POLICY,
      policyVersion: 4,
    });
  });

  it("caps a window by an explicit ARCHIVER_ELIGIBLE_BEFORE, and says so", () => {
    const pinned = fixedCutoff(new Date("2026-01-01T00:00:00Z"));
    const short = table({ archiveAfter: d("90d") });
    expect(archiveCutoffAt(short, pinned, NOW).toISOString()).toBe("2026-01-01T00:00:00.000Z");
    expect(cappedByGlobalCutoff(short, pinned, NOW)).toBe(true);
    expect(explainEligibility(short, pinned, NOW)).toMatchObject({
      rule: "capped",
      why: expect.stringMatching(/ARCHIVER_ELIGIBLE_BEFORE 2026-01-01T00:00:00.000Z is earlier/),
    });
    const long = table({ archiveAfter: d("2y") });
    expect(archiveCutoffAt(long, pinned, NOW).toISOString()).toBe("2024-06-15T12:00:00.000Z");
    expect(explainEligibility(long, pinned, NOW).rule).toBe("window");
  });

  it("says when a paused table claims nothing", () => {
    expect(explainEligibility(table({ paused: true }), DEFAULT_CUTOFF_POLICY, NOW).why).toMatch(
      /paused: nothing is claimed until `pulpitum tables resume`/,
    );
  });
});
