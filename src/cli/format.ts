import { escapeText } from "../domain/display.js";

/**
 * Plain text tables for human output; `--json` output bypasses this
 * entirely. Every cell is escaped (domain/display.ts): a stored string
 * cannot add a line, move the cursor or reorder what a terminal shows.
 */
export function renderTable(
  headers: string[],
  rows: Array<Array<string | number | null | undefined>>,
): string {
  const cells = rows.map((r) =>
    r.map((c) => (c === null || c === undefined ? "-" : escapeText(String(c)))),
  );
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]?.length ?? 0)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [line(headers), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n");
}

export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** A duration as people say it: `45 s`, `1 min 20 s`, `2 h 5 min`. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(1, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min${seconds % 60 === 0 ? "" : ` ${seconds % 60} s`}`;
  const hours = Math.floor(minutes / 60);
  return `${hours} h${minutes % 60 === 0 ? "" : ` ${minutes % 60} min`}`;
}

export function printJson(value: unknown): void {
  process.stdout.write(
    `${JSON.stringify(value, (_key, v) => (typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString("base64") : v), 2)}\n`,
  );
}

/** `1 record`, `2 records`. */
export function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}
