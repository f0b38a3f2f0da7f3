import { createInterface } from "node:readline";

/**
 * The lines of `input`, none lost however long the caller waits before it
 * starts iterating. readline emits lines as soon as the input flows, and an
 * async iterator taken later misses those already emitted; this one is taken
 * at once and buffers them.
 */
export function readLines(input: NodeJS.ReadableStream): AsyncIterable<string> & {
  close(): void;
} {
  const lines = createInterface({ input, crlfDelay: Infinity });
  const iterator = lines[Symbol.asyncIterator]();
  return { [Symbol.asyncIterator]: () => iterator, close: () => lines.close() };
}
