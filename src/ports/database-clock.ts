/**
 * The hot store's own clock: the one time that decides what may be
 * archived, expired or erased (adapters/sql/hot-store/database-cutoffs.ts).
 * A process reads it to learn how far its own clock is off
 * (usecases/clock-skew.ts).
 */
export interface DatabaseClock {
  /**
   * The database server's clock at the moment the statement runs
   * (`clock_timestamp()`), read in one round trip. Read-only; safe to retry.
   */
  databaseTime(): Promise<Date>;
}
