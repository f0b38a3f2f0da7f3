/** Registrars of the commands that fill and archive: import, plan, archive, verify, status, reclaim. */
import type { Command } from "commander";
import { RECORD_JSON_FORM } from "../../domain/record.js";
import { parseTableId } from "../../domain/table.js";
import { UsageError } from "../exit-codes.js";
import { integerOption } from "../options.js";
import { bucketArguments } from "../bucket-arguments.js";

export function registerImport(program: Command): void {
  program
    .command("import")
    .argument("<table>", "table id")
    .argument("[file]", "newline-delimited JSON records, or - for stdin", "-")
    .description(
      `append records, one JSON object per line: ${RECORD_JSON_FORM}. Stops at the first line that is invalid or refused; every line before it is stored, nothing from it on`,
    )
    .option(
      "--dry-run",
      "check every line (and whether its bucket accepts appends) without writing",
    )
    .option("--json", "print the report as JSON")
    .action(async (table: string, file: string, opts: { dryRun?: boolean; json?: boolean }) => {
      const tableId = parseTableId(table, "TABLE");
      await (await import("../commands/import.js")).importCommand(tableId, file, opts);
    });
}

export function registerPlan(program: Command): void {
  program
    .command("plan")
    .description(
      "show what would be archived now and why, and which buckets are held back and why, changing nothing",
    )
    .option("--json", "print as JSON")
    .option("--limit <n>", "at most this many buckets per list (1-10000)", "1000")
    .action(async (opts: { json?: boolean; limit: string }) => {
      const limit = integerOption(opts.limit, "--limit", 1, 10_000);
      await (await import("../commands/plan.js")).planCommand({ ...opts, limit });
    });
}

export function registerArchive(program: Command): void {
  program
    .command("archive")
    .description(
      "run the standalone archiver: discovery every ARCHIVER_INTERVAL_SECONDS and a pool of ARCHIVER_WORKERS; one line per bucket archived, a summary at the end",
    )
    .argument("[target...]", "with --bucket: TABLE PARTITION BUCKET")
    .option("--once", "work until nothing is left that this process can advance, then exit")
    .option(
      "--bucket",
      "archive only the bucket TABLE PARTITION BUCKET, from any machine (same lease as the fleet; runs a quarantined bucket too)",
    )
    .option("--partition-key-b64 <b64>", "with --bucket: partition key as standard base64")
    .option(
      "--json",
      "print one JSON object per line: each archived or deferred bucket, then a summary",
    )
    .action(
      async (
        target: string[],
        opts: { once?: boolean; json?: boolean; bucket?: boolean; partitionKeyB64?: string },
      ) => {
        const archive = await import("../commands/archive.js");
        const usage =
          "archive --bucket TABLE PARTITION BUCKET, or archive --bucket TABLE BUCKET --partition-key-b64 B64";
        if (opts.bucket !== true) {
          if (target.length > 0 || opts.partitionKeyB64 !== undefined)
            throw new UsageError(`arguments need --bucket; usage: ${usage}`);
          return await archive.archiveCommand(opts);
        }
        if (opts.once === true) throw new UsageError(`--once and --bucket cannot go together`);
        const [table, first, second, ...extra] = target;
        if (table === undefined || first === undefined || extra.length > 0)
          throw new UsageError(`usage: ${usage}`);
        const id = bucketArguments(table, first, second, opts.partitionKeyB64, usage);
        await archive.archiveBucketCommand(id, opts);
      },
    );
}

export function registerVerify(program: Command): void {
  program
    .command("verify")
    .description(
      "re-read archived buckets and prove them right: manifest, every payload's bytes and rows, catalog entry; mark damaged buckets corrupt (exit 4 if any)",
    )
    .argument("[target...]", "TABLE (only its buckets), or with --bucket: TABLE PARTITION BUCKET")
    .option(
      "--bucket",
      "verify only the bucket TABLE PARTITION BUCKET (whatever its last verification)",
    )
    .option("--partition-key-b64 <b64>", "with --bucket: partition key as standard base64")
    .option("--sample <n>", "verify only the N buckets verified longest ago")
    .option(
      "--erasure <job>",
      "prove an erasure job (docs/erasure.md): no hot row, published payload or catalog-listed object of its partition holds a record in its range (exit 4 if one does)",
    )
    .option("--json", "print the report as JSON")
    .action(
      async (
        target: string[],
        opts: {
          bucket?: boolean;
          partitionKeyB64?: string;
          sample?: string;
          erasure?: string;
          json?: boolean;
        },
      ) => {
        if (opts.erasure !== undefined) {
          if (target.length > 0 || opts.bucket === true || opts.sample !== undefined)
            throw new UsageError("--erasure JOB goes alone: verify --erasure JOB [--json]");
          const { verifyErasureCommand } = await import("../commands/erase.js");
          return await verifyErasureCommand(opts.erasure, { json: opts.json });
        }
        const usage =
          "verify [TABLE] [--sample N], or verify --bucket TABLE PARTITION BUCKET (or TABLE BUCKET --partition-key-b64 B64)";
        const sample =
          opts.sample === undefined
            ? undefined
            : integerOption(opts.sample, "--sample", 1, Number.MAX_SAFE_INTEGER);
        const { verifyCommand } = await import("../commands/verify.js");
        if (opts.bucket !== true) {
          if (target.length > 1 || opts.partitionKeyB64 !== undefined)
            throw new UsageError(`usage: ${usage}`);
          const tableId = target[0] === undefined ? undefined : parseTableId(target[0], "TABLE");
          return await verifyCommand({ tableId, sample, json: opts.json });
        }
        if (sample !== undefined) throw new UsageError("--sample and --bucket cannot go together");
        const [table, first, second, ...extra] = target;
        if (table === undefined || first === undefined || extra.length > 0)
          throw new UsageError(`usage: ${usage}`);
        const bucket = bucketArguments(table, first, second, opts.partitionKeyB64, usage);
        await verifyCommand({ bucket, json: opts.json });
      },
    );
}

export function registerStatus(program: Command): void {
  program
    .command("status")
    .description(
      "buckets per table and state, rows, bytes, deferred buckets with their last error, archival lag",
    )
    .option("--json", "print as JSON")
    .action(async (opts: { json?: boolean }) =>
      (await import("../commands/status.js")).statusCommand(opts),
    );
}

export function registerReclaim(program: Command): void {
  program
    .command("reclaim")
    .description(
      "give the embedded store's disk space back after cleanup (VACUUM FULL; archive runs do it on their own when they deleted many rows); prints the bytes before and after",
    )
    .option("--json", "print the result as JSON")
    .action(async (opts: { json?: boolean }) =>
      (await import("../commands/reclaim.js")).reclaimCommand(opts),
    );
}
