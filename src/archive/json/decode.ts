/**
 * Decoding JSON payloads: newline-delimited records, streamed, or a legacy
 * JSON array decoded whole.
 */
import { ArchiveIntegrityError, errorMessage } from "../../errors.js";
import { recordFromJson, recordFromJsonLine, type TableRecord } from "../../domain/record.js";
import { integrityFailure, type ByteSource } from "../byte-sources.js";

/** A published payload is read as written: the event-time range guards what enters the hot store, not what already left it. */
const PUBLISHED = { checkEventTimeRange: false } as const;

export async function* readJsonBatches(
  source: ByteSource,
  batchRows: number,
): AsyncIterable<TableRecord[]> {
  const chunks = source.stream()[Symbol.asyncIterator]();
  // Find the first non-whitespace byte to tell NDJSON from a legacy array.
  const head: Uint8Array[] = [];
  let first: number | undefined;
  while (first === undefined) {
    const next = await chunks.next();
    if (next.done === true) break;
    head.push(next.value);
    first = next.value.find((b) => !isJsonSpace(b));
  }
  if (first === undefined) return; // empty payload: an empty bucket
  const rest = (async function* () {
    yield* head;
    for (;;) {
      const next = await chunks.next();
      if (next.done === true) return;
      yield next.value;
    }
  })();
  if (first === 0x5b /* [ */) {
    yield* readLegacyJsonArray(source, rest, batchRows);
  } else {
    yield* readNdjson(source, rest, batchRows);
  }
}

function isJsonSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

async function* readNdjson(
  source: ByteSource,
  chunks: AsyncIterable<Uint8Array>,
  batchRows: number,
): AsyncIterable<TableRecord[]> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let carry = "";
  let lineNumber = 0;
  let batch: TableRecord[] = [];
  const parseLine = (line: string): TableRecord => {
    lineNumber++;
    try {
      return recordFromJsonLine(line, `line ${lineNumber}`, PUBLISHED);
    } catch (error) {
      throw new ArchiveIntegrityError(source.name, `JSON payload ${errorMessage(error)}`, {
        cause: error,
      });
    }
  };
  try {
    for await (const chunk of chunks) {
      const text = carry + decoder.decode(chunk, { stream: true });
      const lines = text.split("\n");
      carry = lines.pop()!;
      for (const line of lines) {
        batch.push(parseLine(line));
        if (batch.length >= batchRows) {
          yield batch;
          batch = [];
        }
      }
    }
    carry += decoder.decode();
  } catch (error) {
    throw integrityFailure(source, "JSON payload is not valid UTF-8", error);
  }
  if (carry !== "") {
    throw new ArchiveIntegrityError(
      source.name,
      `JSON payload does not end with a newline after line ${lineNumber} (truncated?)`,
    );
  }
  if (batch.length > 0) yield batch;
}

async function* readLegacyJsonArray(
  source: ByteSource,
  chunks: AsyncIterable<Uint8Array>,
  batchRows: number,
): AsyncIterable<TableRecord[]> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(parts)));
  } catch (error) {
    throw integrityFailure(source, "legacy JSON payload does not parse", error);
  }
  if (!Array.isArray(parsed)) {
    throw new ArchiveIntegrityError(source.name, "legacy JSON payload is not an array of records");
  }
  let batch: TableRecord[] = [];
  for (let i = 0; i < parsed.length; i++) {
    try {
      batch.push(recordFromJson(parsed[i], `element ${i}`, PUBLISHED));
    } catch (error) {
      throw new ArchiveIntegrityError(source.name, `legacy JSON payload ${errorMessage(error)}`, {
        cause: error,
      });
    }
    if (batch.length >= batchRows) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}
