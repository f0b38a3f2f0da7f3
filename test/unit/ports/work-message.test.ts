import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../src/errors.js";
import {
  WORK_MESSAGE_FORM,
  decodeWorkMessage,
  encodeWorkMessage,
  workItemFromObject,
  type WorkItem,
} from "../../../src/ports/work-queue.js";
import { parseTableId, TABLE_ID_RULE } from "../../../src/domain/table.js";

const INPUT = "message 6f1c-42";

function aBody(overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    v: 1,
    table_id: "events",
    partition_key_b64: "dGVuYW50LTQy",
    bucket_key: "month:2024-02",
    ...overrides,
  });
}

function invalidInputFrom(action: () => unknown): InvalidInputError {
  try {
    action();
  } catch (error) {
    if (error instanceof InvalidInputError) return error;
    throw error;
  }
  throw new Error("expected an InvalidInputError");
}

describe("work message decoding", () => {
  it("a valid body decodes to the bucket it names", () => {
    // Prepare
    const body = aBody();

    // Act
    const item = decodeWorkMessage(body, INPUT);

    // Assess
    expect(item).toEqual({
      tableId: "events",
      partitionKey: new Uint8Array(Buffer.from("tenant-42")),
      bucketKey: "month:2024-02",
    });
  });

  it.each([
    ["an empty partition key", { partition_key_b64: "" }],
    ["a year bucket", { bucket_key: "year:1999" }],
    ["a leap-day bucket", { bucket_key: "day:2024-02-29" }],
  ])("a body with %s is valid", (_, overrides) => {
    // Act
    const item = decodeWorkMessage(aBody(overrides), INPUT);

    // Assess
    expect(item.tableId).toBe("events");
  });

  it.each<[string, WorkItem]>([
    [
      "binary partition key",
      {
        tableId: parseTableId("events"),
        partitionKey: new Uint8Array([0xfb, 0xff, 0x00]),
        bucketKey: "day:2024-12-31",
      },
    ],
    [
      "empty partition key",
      { tableId: parseTableId("t"), partitionKey: new Uint8Array(), bucketKey: "year:2024" },
    ],
  ])("a work item with a %s survives encode and decode", (_, item) => {
    // Act
    const decoded = decodeWorkMessage(encodeWorkMessage(item), INPUT);

    // Assess
    expect(decoded).toEqual(item);
  });

  it("an encoded message has exactly the documented fields", () => {
    // Prepare
    const item: WorkItem = {
      tableId: parseTableId("events"),
      partitionKey: new Uint8Array([0xfb, 0xff]),
      bucketKey: "year:2024",
    };

    // Act
    const body = encodeWorkMessage(item);

    // Assess
    expect(body).toBe(
      '{"v":1,"table_id":"events","partition_key_b64":"+/8=","bucket_key":"year:2024"}',
    );
  });

  it.each([
    ["not JSON", "{v:1", "body is not JSON"],
    ["empty", "", "body is not JSON"],
    ["a JSON array", "[1]", "is not a JSON object"],
    ["JSON null", "null", "is not a JSON object"],
    ["a JSON string", '"events"', "is not a JSON object"],
    ["of version 2", aBody({ v: 2 }), "has version 2"],
    ['of version "1"', aBody({ v: "1" }), 'has version "1"'],
    [
      "without a version",
      JSON.stringify({ table_id: "events", partition_key_b64: "", bucket_key: "year:2024" }),
      "has version undefined",
    ],
    ["with an unknown field", aBody({ priority: "high" }), 'has unknown field "priority"'],
    ["without a table id", aBody({ table_id: undefined }), "table_id is not a string"],
    ["with a numeric table id", aBody({ table_id: 7 }), "table_id is not a string"],
    [
      "with url-safe base64",
      aBody({ partition_key_b64: "-_8=" }),
      "partition_key_b64 is not standard base64",
    ],
    [
      "with unpadded base64",
      aBody({ partition_key_b64: "AA" }),
      "partition_key_b64 is not standard base64",
    ],
    [
      "without a partition key",
      aBody({ partition_key_b64: undefined }),
      "partition_key_b64 is not standard base64",
    ],
    ["with a malformed bucket key", aBody({ bucket_key: "2024" }), 'bucket_key "2024"'],
    ["with a one-digit month", aBody({ bucket_key: "month:2024-1" }), 'bucket_key "month:2024-1"'],
    ["with a month 13", aBody({ bucket_key: "month:2024-13" }), 'bucket_key "month:2024-13"'],
    [
      "with a day that does not exist",
      aBody({ bucket_key: "day:2023-02-29" }),
      'bucket_key "day:2023-02-29"',
    ],
    ["with year 0000", aBody({ bucket_key: "year:0000" }), 'bucket_key "year:0000"'],
    ["without a bucket key", aBody({ bucket_key: undefined }), "bucket_key undefined"],
  ])("a body %s is refused, naming the message and the accepted form", (_, body, problem) => {
    // Act
    const error = invalidInputFrom(() => decodeWorkMessage(body, INPUT));

    // Assess
    expect(error.input).toBe(INPUT);
    expect(error.message).toContain(`${INPUT}: ${problem}`);
    expect(error.accepted).toBe(WORK_MESSAGE_FORM);
    expect(error.message).toContain(`expected ${WORK_MESSAGE_FORM}`);
    expect(error.retryable).toBe(false);
  });

  it("a body that is not JSON keeps the parser error as its cause", () => {
    // Act
    const error = invalidInputFrom(() => decodeWorkMessage("not json", INPUT));

    // Assess
    expect(error.cause).toBeInstanceOf(SyntaxError);
  });

  it.each([["Events"], ["../events"], [""], ["a".repeat(64)]])(
    "a body with the invalid table id %j is refused, naming the message field and the table id rule",
    (tableId) => {
      // Act
      const error = invalidInputFrom(() => decodeWorkMessage(aBody({ table_id: tableId }), INPUT));

      // Assess
      expect(error.input).toBe(`${INPUT} table_id ${JSON.stringify(tableId)}`);
      expect(error.accepted).toBe(TABLE_ID_RULE);
    },
  );

  it("a manual invocation object is checked against the caller's accepted form", () => {
    // Prepare
    const accepted = '{"v":1,...} as a manual invocation';

    // Act
    const item = workItemFromObject(JSON.parse(aBody()), "manual event", accepted);
    const error = invalidInputFrom(() => workItemFromObject({ v: 1 }, "manual event", accepted));

    // Assess
    expect(item.bucketKey).toBe("month:2024-02");
    expect(error.message).toBe(`manual event: table_id is not a string; expected ${accepted}`);
  });
});
