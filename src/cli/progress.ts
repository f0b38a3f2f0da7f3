/** A one-line progress bar on a terminal's stderr; silent when stderr is not a TTY. */
export class ProgressBar {
  readonly #enabled: boolean;
  #last = 0;

  constructor(
    private readonly label: string,
    private total: number | undefined,
    stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.#enabled = stream.isTTY === true;
    this.stream = stream;
  }

  private readonly stream: NodeJS.WriteStream;

  setTotal(total: number): void {
    this.total = total;
  }

  update(done: number, detail = ""): void {
    if (!this.#enabled) return;
    const now = Date.now();
    if (now - this.#last < 100 && (this.total === undefined || done < this.total)) return;
    this.#last = now;
    const width = 30;
    let line: string;
    if (this.total !== undefined && this.total > 0) {
      const ratio = Math.min(1, done / this.total);
      const filled = Math.round(ratio * width);
      line = `${this.label} [${"#".repeat(filled)}${"-".repeat(width - filled)}] ${done}/${this.total}`;
    } else {
      line = `${this.label} ${done}`;
    }
    this.stream.write(
      `\r${line} ${detail}`
        .slice(0, (this.stream.columns ?? 120) - 1)
        .padEnd(Math.min(this.stream.columns ?? 120, 120) - 1),
    );
  }

  finish(): void {
    if (this.#enabled) this.stream.write("\n");
  }
}
