/** `pulpitum status`. */
import { cutoffAt, formatCutoffAt } from "../../domain/cutoff.js";
import { printJson } from "../format.js";
import { withRuntime } from "../session.js";
import { renderStatus, statusToJson } from "../status.js";

export async function statusCommand(opts: { json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const now = rt.clock.now();
    const report = await rt.hotStore.statusReport(now, cutoffAt(rt.config.cutoff, now));
    const cutoff = formatCutoffAt(rt.config.cutoff, now);
    const { scrubStoreOf } = await import("../../adapters/sql/scrub-store.js");
    const scrubs = scrubStoreOf(rt.hotStore);
    const corrupt = (await scrubs?.corruptBuckets(20)) ?? { total: 0, buckets: [] };
    const integrity = {
      corruptTotal: corrupt.total,
      corrupt: corrupt.buckets,
      lastRun: (await scrubs?.readRun(rt.archivePrefix)) ?? null,
    };
    if (opts.json) printJson(statusToJson(report, cutoff, integrity));
    else console.log(renderStatus(report, cutoff, integrity));
  });
}
