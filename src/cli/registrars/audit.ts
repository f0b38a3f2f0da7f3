/** The registrar of `pulpitum audit`. */
import type { Command } from "commander";
import { parseTableId } from "../../domain/table.js";
import { microsToDate, parseRfc3339Micros } from "../../domain/time.js";
import { InvalidInputError } from "../../errors.js";
import { UsageError } from "../exit-codes.js";
import { integerOption } from "../options.js";

const DURATION = /^(\d{1,6})([dhm])$/;
const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000 } as const;

/** `--since`: an RFC 3339 time, or a duration back from now (`7d`, `24h`, `30m`). */
export function sinceOption(text: string, now: Date): Date {
  const duration = DURATION.exec(text);
  if (duration !== null) {
    const ms = Number(duration[1]) * UNIT_MS[duration[2] as keyof typeof UNIT_MS];
    return new Date(now.getTime() - ms);
  }
  try {
    return microsToDate(parseRfc3339Micros(text, "--since"));
  } catch {
    throw new InvalidInputError(
      `--since ${JSON.stringify(text)}`,
      "is neither a time nor a duration",
      "an RFC 3339 time (2026-01-31T00:00:00Z) or a duration back from now (7d, 24h, 30m)",
    );
  }
}

export function registerAudit(program: Command): void {
  program
    .command("audit")
    .description(
      "list the audit trail, newest first: each operator action (tables, restore, retry, gc, dlq replay, manual runs, verify, catalog rebuild, reclaim, migrate, roles) with its target, caller, time and outcome",
    )
    .option("--table <table>", "only actions on this table")
    .option(
      "--since <time>",
      "only actions since this RFC 3339 time, or this long ago (7d, 24h, 30m)",
    )
    .option("--limit <n>", "at most this many actions (1 to 10000)", "100")
    .option("--json", "print the records as a JSON array")
    .option(
      "--verify",
      "check the trail's hash chain: exit 0 when every record is as the audit routine wrote it, 4 naming the first record inserted, altered or removed out of band",
    )
    .action(
      async (opts: {
        table?: string;
        since?: string;
        limit: string;
        json?: boolean;
        verify?: boolean;
      }) => {
        const { auditCommand, verifyAuditCommand } = await import("../commands/audit.js");
        if (opts.verify) {
          if (opts.table !== undefined || opts.since !== undefined)
            throw new UsageError("--verify checks the whole trail: leave out --table and --since");
          await verifyAuditCommand({ json: opts.json });
          return;
        }
        await auditCommand({
          tableId: opts.table === undefined ? undefined : parseTableId(opts.table, "--table"),
          since: opts.since === undefined ? undefined : sinceOption(opts.since, new Date()),
          limit: integerOption(opts.limit, "--limit", 1, 10_000),
          json: opts.json,
        });
      },
    );
}
