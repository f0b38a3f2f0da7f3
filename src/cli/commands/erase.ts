/** `pulpitum erase`: the durable erasure job (usecases/erase.ts, docs/erasure.md), audited. */
import { erasureStoreOf } from "../../adapters/sql/erasure-store.js";
import { microsToDate } from "../../domain/time.js";
import { escapeText, showBucket } from "../../domain/display.js";
import type { TableId } from "../../domain/table.js";
import { ConfigError } from "../../errors.js";
import type { AuditCaller } from "../../ports/audit-trail.js";
import { auditAction, runAudited } from "../../usecases/audit.js";
import { erasureConclusion, eraseKey, type ErasureReport } from "../../usecases/erase.js";
import { proveErasure, type ErasureProof } from "../../usecases/erase-proof.js";
import { EXIT } from "../exit-codes.js";
import { cliAudit, cliCaller } from "../audit-caller.js";
import { count, printJson } from "../format.js";
import { timeRangeFrom } from "../options.js";
import { cliLog, withRuntime } from "../session.js";

export interface EraseOptions {
  readonly from?: string;
  readonly to?: string;
  readonly dryRun?: boolean;
  readonly json?: boolean;
}

/** The caller as one line of text, for the job row (the trail keeps the structured form). */
export function callerText(caller: AuditCaller): string {
  return caller.kind === "lambda"
    ? `lambda ${caller.functionName} request ${caller.requestId}${caller.requestedBy ? ` for ${caller.requestedBy}` : ""}`
    : `${caller.kind} ${caller.kind === "cli" ? caller.osUser : ""}@${caller.host}`;
}

export async function eraseCommand(
  tableId: TableId,
  partitionKey: Uint8Array,
  opts: EraseOptions,
): Promise<void> {
  const range = timeRangeFrom(opts.from, opts.to);
  await withRuntime(async (rt) => {
    const store = erasureStoreOf(rt.hotStore);
    if (store === null)
      throw new ConfigError([
        {
          variable: "DATABASE_URL",
          value: undefined,
          accepted:
            "erasure jobs need the SQL hot store (PostgreSQL, CockroachDB or the embedded one)",
        },
      ]);
    const caller = cliCaller();
    const request = {
      tableId,
      partitionKey,
      range: {
        from: range.from === undefined ? null : microsToDate(range.from),
        to: range.to === undefined ? null : microsToDate(range.to),
      },
      requestedBy: callerText(caller),
      dryRun: opts.dryRun === true,
    };
    const ctx = rt.context(cliLog());
    // A dry run changes nothing and, as every dry run, is not audited (docs/audit.md).
    const report = request.dryRun
      ? await eraseKey(ctx, store, request)
      : await runAudited(
          cliAudit(rt),
          auditAction("erase", showBucket({ tableId, partitionKey, bucketKey: "*" }), caller, {
            tableId,
            arguments: {
              partition_key_b64: Buffer.from(partitionKey).toString("base64"),
              from: request.range.from?.toISOString() ?? null,
              to: request.range.to?.toISOString() ?? null,
            },
          }),
          () => eraseKey(ctx, store, request),
          erasureConclusion,
        );
    if (opts.json) printJson(report);
    else console.log(renderErasure(report));
    if (report.status === "pending") process.exitCode = 1;
  });
}

export function renderErasure(report: ErasureReport): string {
  const head = report.dry_run
    ? `dry run: would erase ${count(report.records_removed, "record")} from ${count(report.buckets.length, "bucket")}; nothing changed`
    : `erasure job ${report.job_id} ${report.status}${report.resumed ? " (resumed)" : ""}: ` +
      `${count(report.records_removed, "record")} erased from ${count(report.buckets.length, "bucket")}`;
  const lines = [head];
  for (const b of report.buckets) {
    const versions =
      b.tier === "archive" && b.manifest_after !== null && b.manifest_after !== b.manifest_before
        ? `, archive generation ${b.generation_before} -> ${b.generation_after}`
        : "";
    lines.push(
      `  ${b.bucket_key} (${b.tier}): ${b.status}, ${count(b.records_removed, "record")}${versions}` +
        (b.reason === null ? "" : ` — ${escapeText(b.reason)}`),
    );
  }
  if (report.status === "pending")
    lines.push("buckets in flight are pending: run the same erase again once they settle");
  return lines.join("\n");
}

/** `pulpitum verify --erasure JOB`: exit 4 unless the stores prove the job's erasure. */
export async function verifyErasureCommand(jobId: string, opts: { json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const store = erasureStoreOf(rt.hotStore);
    if (store === null)
      throw new ConfigError([
        {
          variable: "DATABASE_URL",
          value: undefined,
          accepted: "erasure jobs need the SQL hot store",
        },
      ]);
    const proof = await proveErasure(rt.context(cliLog()), store, jobId);
    if (opts.json) printJson(proof);
    else console.log(renderProof(proof));
    if (!proof.proven) process.exitCode = EXIT.integrity;
  });
}

function renderProof(proof: ErasureProof): string {
  const head = proof.proven
    ? `erasure job ${proof.job_id} (${proof.job_status}) proven: none of ${count(proof.buckets_checked, "bucket")} of the partition holds a record in the range in its hot rows, published archive or query catalog`
    : `erasure job ${proof.job_id} (${proof.job_status}) NOT proven: ${count(proof.problems.length, "problem")}`;
  return [head, ...proof.problems.map((p) => `  ${p.bucket_key}: ${escapeText(p.problem)}`)].join(
    "\n",
  );
}
