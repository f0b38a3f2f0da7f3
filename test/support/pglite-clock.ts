/**
 * The embedded database's clock, moved by a test. PGlite's `now()` reads
 * the host's `Date.now()`, so shifting `Date.now` by an offset moves the
 * database's clock as a jump of its host's clock would, while the harness's
 * process clock (a ManualClock) stays wherever the test puts it: the two
 * can be moved together (hours of hourly runs in a second) or apart (a
 * worker whose clock runs a day ahead). `restore()` after each test.
 */
export class PgliteClock {
  readonly #realNow = Date.now.bind(Date);
  #offsetMs = 0;
  #installed = false;

  /** Start following the offset (0 until {@link advance}). */
  install(): void {
    if (this.#installed) return;
    this.#installed = true;
    Date.now = () => this.#realNow() + this.#offsetMs;
  }

  /** Move the database's clock forward by `ms`. */
  advance(ms: number): void {
    if (!this.#installed) throw new Error("PgliteClock.advance before install()");
    this.#offsetMs += ms;
  }

  restore(): void {
    if (!this.#installed) return;
    Date.now = this.#realNow;
    this.#installed = false;
    this.#offsetMs = 0;
  }
}
