/**
 * Fuzzing the readers of catalog entries, object names and NDJSON import
 * lines. A catalog entry's bytes give its URIs; a name that parses is the
 * very name its parts render to; an import line gives a record or an
 * InvalidInputError, and an import stopped at an invalid line stored
 * nothing from it (nothing is appended at all).
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshPgliteHotStore } from "../support/pglite-template.js";
import {
  catalogEntryName,
  parseCatalogEntryName,
  parsePayloadName,
  partitionKeyOfSegment,
  partitionKeySegment,
  payloadName,
} from "../../src/domain/object-keys.js";
import { recordFromJsonLine, recordToJson, toBase64 } from "../../src/domain/record.js";
import { parseTableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { InvalidInputError } from "../../src/errors.js";
import type { HotStore } from "../../src/ports/hot-store.js";
import { parseCatalogEntry } from "../../src/usecases/catalog.js";
import { ImportStoppedError, importRecords } from "../../src/usecases/import-records.js";
import {
  fuzz,
  fuzzTimeout,
  hostileObject,
  mutatedBytes,
  mutatedText,
  resultOrTyped,
} from "./fuzz.js";

const SHA = "ab".repeat(32);
const SEGMENT = partitionKeySegment(new Uint8Array([1, 2, 3]));
const ENTRY_NAME = catalogEntryName("month:2025-03", SEGMENT, "g7-0123456789ab");
const PAYLOAD_NAME = payloadName(SHA, "parquet", { generation: 7, ownerToken: "owner" });
const RECORD = recordToJson({
  partitionKey: new Uint8Array([7]),
  eventTime: parseRfc3339Micros("2025-03-02T10:00:00.5Z"),
  sortKey: Buffer.from("k"),
  value: Buffer.from("v"),
});
const LINE = JSON.stringify(RECORD);
const hostileLine = fc.oneof(
  mutatedText(LINE),
  hostileObject({ ...RECORD }).map((v) => JSON.stringify(v) ?? ""),
);

describe("fuzzing the readers of catalog entries, object names and import lines", () => {
  it(
    "a catalog entry's bytes give trimmed, non-empty lines",
    async () => {
      const entry = Buffer.from(
        "s3://bucket/a/payloads/x.parquet\ns3://bucket/b/payloads/y.parquet\n",
      );
      await fuzz("catalog entry", fc.oneof(mutatedBytes(entry), fc.uint8Array()), (bytes) => {
        for (const uri of parseCatalogEntry(bytes)) {
          expect(uri).toBe(uri.trim());
          expect(uri).not.toBe("");
          expect(uri).not.toContain("\n");
        }
      });
    },
    fuzzTimeout(),
  );

  it(
    "a catalog entry name, payload name or partition segment that parses renders back to itself",
    async () => {
      const names = fc.oneof(
        mutatedText(ENTRY_NAME),
        mutatedText(PAYLOAD_NAME),
        mutatedText(SEGMENT),
        fc.string(),
      );
      await fuzz("catalog entry and payload names", names, (name) => {
        const entry = parseCatalogEntryName(name);
        if (entry !== null) {
          const rendered =
            entry.version === null
              ? null
              : catalogEntryName(entry.bucketKey, entry.partitionSegment, entry.version);
          if (rendered !== null) expect(rendered).toBe(name);
        }
        const payload = parsePayloadName(name);
        if (payload !== null) {
          const attempt =
            payload.generation === null ? "" : `-g${payload.generation}-${payload.tag}`;
          expect(`${payload.sha256}${attempt}.${payload.format}`).toBe(name);
        }
        const key = partitionKeyOfSegment(name);
        if (key !== null) expect(partitionKeySegment(key)).toBe(name);
      });
    },
    fuzzTimeout(),
  );

  it(
    "an NDJSON line gives a record that renders back to an equal line or an InvalidInputError",
    async () => {
      await fuzz("NDJSON import line", hostileLine, async (line) => {
        const r = await resultOrTyped(InvalidInputError, () => recordFromJsonLine(line, "line 1"));
        if (r.ok) {
          const again = recordFromJsonLine(JSON.stringify(recordToJson(r.value)));
          expect(again).toEqual(r.value);
        }
      });
    },
    fuzzTimeout(),
  );

  describe("an import of a hostile line", () => {
    let store: HotStore;
    const appended: number[] = [];
    const table = parseTableId("fuzzed");
    beforeAll(async () => {
      const inner = await freshPgliteHotStore();
      await inner.registerTable(
        { tableId: table, strategy: "CalendarMonthUtc", format: "json", writableBuckets: null },
        new Date("2026-01-01T00:00:00Z"),
      );
      // Every append the import makes, counted: an invalid line must make none.
      store = new Proxy(inner, {
        get(target, property, receiver) {
          const member = Reflect.get(target, property, receiver) as unknown;
          if (property === "append" && typeof member === "function") {
            return (...args: Parameters<HotStore["append"]>) => {
              appended.push(args[1].length);
              return inner.append(...args);
            };
          }
          return typeof member === "function" ? member.bind(target) : member;
        },
      });
    });
    afterAll(async () => {
      await store.close();
    });

    it(
      "stores the record of a valid line, or stops at the line having stored nothing",
      async () => {
        await fuzz(
          "NDJSON import (nothing written)",
          hostileLine,
          async (line) => {
            appended.length = 0;
            const lines = (async function* () {
              yield line;
            })();
            const options = {
              tableId: table,
              source: "fuzz",
              dryRun: false,
              now: () => new Date("2026-01-01T00:00:00Z"),
            };
            const r = await resultOrTyped(ImportStoppedError, () =>
              importRecords(store, lines, options),
            );
            if (r.ok) {
              expect(r.value.records).toBe(line.trim() === "" ? 0 : 1);
              return;
            }
            const stop = (r.error as ImportStoppedError).stop;
            if (stop.kind === "invalid-record") expect(appended).toEqual([]);
            expect((r.error as ImportStoppedError).report.inserted).toBe(0);
          },
          { caseTimeoutMs: 10_000 },
        );
      },
      fuzzTimeout(10),
    );
  });
});

it("the unfuzzed inputs parse, so the mutations start from valid ones", () => {
  expect(parseCatalogEntryName(ENTRY_NAME)?.version).toBe("g7-0123456789ab");
  expect(parsePayloadName(PAYLOAD_NAME)?.sha256).toBe(SHA);
  expect(toBase64(recordFromJsonLine(LINE).value)).toBe(RECORD.value);
});
