import { fixedCutoff } from "../../src/domain/cutoff.js";
import type { Cutoffs } from "../../src/ports/hot-store.js";

/**
 * The cutoffs of an explicit ARCHIVER_ELIGIBLE_BEFORE at `at`: the global
 * rule is a fixed instant, so no clock moves it (tables with a window are
 * still held to it at the database's clock).
 */
export function fixedCutoffs(at: Date): Cutoffs {
  return { cutoff: at, rule: fixedCutoff(at) };
}
