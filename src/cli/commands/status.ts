/**
 * `pulpitum status`.
 *
 * The embedded store serves one process at a time, so while another process
 * holds it (an archive run) this one cannot open it. That process keeps a
 * status snapshot beside the store (status-snapshot.ts); `status` then
 * prints the snapshot, saying whose and how old it is, instead of refusing.
 * It refuses, naming the holder, when the holder keeps no snapshot or its
 * snapshot is stale.
 */
import { formatCutoffAt } from "../../domain/cutoff.js";
import type { Adapters } from "../../open-adapters.js";
import { eligibilityAt } from "../../usecases/eligibility.js";
import { printJson } from "../format.js";
import { withRuntime } from "../session.js";
import { renderStatus, statusToJson } from "../status.js";
import type { StatusSnapshotBody } from "./status-snapshot.js";

/** The status report as `status --json` prints it and as the text `status` prints. */
export async function collectStatus(rt: Adapters): Promise<StatusSnapshotBody> {
  const now = rt.clock.now();
  const eligibility = await eligibilityAt(rt.hotStore, rt.config.cutoff, now);
  const report = await rt.hotStore.statusReport(now, eligibility.cutoffs);
  const cutoff = formatCutoffAt(rt.config.cutoff, now);
  const { scrubStoreOf } = await import("../../adapters/sql/scrub-store.js");
  const scrubs = scrubStoreOf(rt.hotStore);
  const corrupt = (await scrubs?.corruptBuckets(20)) ?? { total: 0, buckets: [] };
  const integrity = {
    corruptTotal: corrupt.total,
    corrupt: corrupt.buckets,
    lastRun: (await scrubs?.readRun(rt.archivePrefix)) ?? null,
  };
  return {
    json: statusToJson(report, cutoff, integrity, eligibility.tables),
    text: renderStatus(report, cutoff, integrity, eligibility.tables),
  };
}

export async function statusCommand(opts: { json?: boolean }): Promise<void> {
  let status: StatusSnapshotBody;
  try {
    status = await withRuntime(collectStatus);
  } catch (error) {
    const { EmbeddedStoreLockedError } = await import("../../adapters/sql/embedded-lock.js");
    if (!(error instanceof EmbeddedStoreLockedError)) throw error;
    const { readStatusSnapshot, snapshotPathOf } = await import("./status-snapshot.js");
    const read = readStatusSnapshot(snapshotPathOf(error.lockPath), error.holder, new Date());
    if (read.kind !== "current") {
      process.stderr.write(`pulpitum: no status from the running process: ${read.reason}\n`);
      throw error;
    }
    const s = read.snapshot;
    const age = Math.round(read.ageMs / 1000);
    const source = `from the running process ${s.pid} (\`${s.command}\`), which holds the embedded store, as of ${s.writtenAt} (${age} s ago)`;
    if (opts.json) {
      printJson({
        ...s.body.json,
        snapshot: { pid: s.pid, command: s.command, written_at: s.writtenAt, age_seconds: age },
      });
    } else {
      console.log(`status ${source}`);
      console.log(s.body.text);
    }
    return;
  }
  if (opts.json) printJson(status.json);
  else console.log(status.text);
}
