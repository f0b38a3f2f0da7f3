/**
 * Positional parameters for every statement of the SQL hot store.
 */
import { bufferView } from "../../../domain/record.js";
import { formatMicrosRfc3339, type EpochMicros } from "../../../domain/time.js";

/**
 * Positional parameters, numbered as they are added, each with the cast that
 * fixes its type: CockroachDB refuses a placeholder whose type its context
 * does not determine (inside VALUES, in a SELECT list), and a cast
 * everywhere keeps every statement valid wherever it is moved.
 */
export class SqlParams {
  readonly values: unknown[] = [];

  #add(value: unknown, type: string): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }

  text(value: string | null): string {
    return this.#add(value, "TEXT");
  }

  int(value: number | null): string {
    return this.#add(value, "INT8");
  }

  bool(value: boolean): string {
    return this.#add(value, "BOOL");
  }

  time(date: Date): string {
    return this.#add(date.toISOString(), "TIMESTAMPTZ");
  }

  timeOrNull(date: Date | null): string {
    return this.#add(date === null ? null : date.toISOString(), "TIMESTAMPTZ");
  }

  micros(micros: EpochMicros): string {
    return this.#add(formatMicrosRfc3339(micros), "TIMESTAMPTZ");
  }

  bytes(bytes: Uint8Array): string {
    return this.#add(bufferView(bytes), "BYTEA");
  }
}
