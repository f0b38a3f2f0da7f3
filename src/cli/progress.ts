/**
 * One line of progress on a terminal's stderr, redrawn in place: what is
 * done, and with a known total the share done and an estimate of the time
 * left. Silent when stderr is not a terminal (a pipe, a file, a CI log), so
 * scripts and logs see only the command's own lines. Output written while
 * the line is up goes through {@link ProgressBar.clear} first, so the line
 * never garbles it.
 */
import { formatDuration } from "./format.js";

export interface ProgressOptions {
  /** How `done` and the total are shown (a byte count, say); default: the number. */
  readonly format?: (n: number) => string;
  /** Said after `done of total` (` buckets`). */
  readonly unit?: string;
  /** Milliseconds since some fixed point; tests pass a manual clock. */
  readonly now?: () => number;
}

/** Redraw at most this often: a terminal need not repaint for every record. */
const REDRAW_MS = 100;

export class ProgressBar {
  readonly #stream: NodeJS.WriteStream;
  readonly #enabled: boolean;
  readonly #format: (n: number) => string;
  readonly #unit: string;
  readonly #now: () => number;
  readonly #started: number;
  #total: number | undefined;
  #lastDraw = Number.NEGATIVE_INFINITY;
  #shown = false;
  #done = 0;
  #detail = "";

  constructor(
    private readonly label: string,
    total: number | undefined,
    stream: NodeJS.WriteStream = process.stderr,
    options: ProgressOptions = {},
  ) {
    this.#stream = stream;
    this.#enabled = stream.isTTY === true;
    this.#total = total;
    this.#format = options.format ?? ((n) => String(n));
    this.#unit = options.unit ?? "";
    this.#now = options.now ?? Date.now;
    this.#started = this.#now();
  }

  /** Whether the line is drawn at all (stderr is a terminal). */
  get enabled(): boolean {
    return this.#enabled;
  }

  setTotal(total: number): void {
    this.#total = total;
  }

  update(done: number, detail = ""): void {
    this.#done = done;
    this.#detail = detail;
    if (!this.#enabled) return;
    const now = this.#now();
    if (now - this.#lastDraw < REDRAW_MS) return;
    this.#lastDraw = now;
    this.#draw();
  }

  /** Erase the line (before other output); the next update draws it again. */
  clear(): void {
    if (!this.#shown) return;
    this.#stream.write("\r\x1b[2K");
    this.#shown = false;
    this.#lastDraw = Number.NEGATIVE_INFINITY;
  }

  /** Draw the final state and end the line. */
  finish(): void {
    if (!this.#enabled || this.#lastDraw === Number.NEGATIVE_INFINITY) {
      if (this.#shown) this.#stream.write("\n");
      this.#shown = false;
      return;
    }
    this.#draw();
    this.#stream.write("\n");
    this.#shown = false;
  }

  /** The line as it is drawn now (without the carriage return). */
  line(): string {
    const total = this.#total;
    const facts: string[] = [];
    let head = this.label;
    if (total !== undefined && total > 0) {
      const ratio = Math.min(1, this.#done / total);
      const width = 20;
      const filled = Math.round(ratio * width);
      head += ` [${"#".repeat(filled)}${"-".repeat(width - filled)}] ${Math.floor(ratio * 100)}%`;
      facts.push(`${this.#format(this.#done)} of ${this.#format(total)}${this.#unit}`);
    } else {
      facts.push(`${this.#format(this.#done)}${this.#unit}`);
    }
    if (this.#detail !== "") facts.push(this.#detail);
    const left = timeLeft(this.#done, total, this.#now() - this.#started);
    if (left !== null) facts.push(left);
    return `${head}: ${facts.join(", ")}`;
  }

  #draw(): void {
    const columns = this.#stream.columns ?? 120;
    this.#stream.write(`\r\x1b[2K${this.line().slice(0, Math.max(10, columns - 1))}`);
    this.#shown = true;
  }
}

/**
 * `about 1 min 20 s left` from the rate so far, or null while it cannot be
 * estimated (no total, nothing done yet, under a second in) or is done.
 */
export function timeLeft(
  done: number,
  total: number | undefined,
  elapsedMs: number,
): string | null {
  if (total === undefined || total <= 0 || done <= 0 || elapsedMs < 1000 || done >= total)
    return null;
  const leftMs = (elapsedMs / done) * (total - done);
  return `about ${formatDuration(leftMs)} left`;
}
