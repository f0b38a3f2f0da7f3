/** `pulpitum status`. */
import { printJson } from "../format.js";
import { withRuntime } from "../session.js";
import { renderStatus, statusToJson } from "../status.js";

export async function statusCommand(opts: { json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const report = await rt.hotStore.statusReport(rt.clock.now(), rt.config.eligibleBefore);
    if (opts.json) printJson(statusToJson(report, rt.config.eligibleBefore));
    else console.log(renderStatus(report, rt.config.eligibleBefore));
  });
}
