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
    if (opts.json) printJson(statusToJson(report, cutoff));
    else console.log(renderStatus(report, cutoff));
  });
}
