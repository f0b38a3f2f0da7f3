/** `pulpitum tables alter|show`: a table's versioned policy (docs/lifecycle.md). */
import { formatDuration, parseDuration, type CalendarDuration } from "../../domain/duration.js";
import { parseArchiveFormat, type TableDefinition, type TableId } from "../../domain/table.js";
import { expireCutoffAt, parseStorageClass, type StorageClass } from "../../domain/table-policy.js";
import { UnknownTableError } from "../../errors.js";
import { POLICY_FIELDS } from "../../ports/hot-store-types.js";
import type { PolicyChange, PolicyField, PolicyVersion } from "../../ports/hot-store.js";
import { auditAction, commitAudited } from "../../usecases/audit.js";
import { explainEligibility } from "../../usecases/eligibility.js";
import { cliAudit, cliCaller } from "../audit-caller.js";
import { strategyName } from "../display.js";
import { printJson, renderTable } from "../format.js";
import { withRuntime } from "../session.js";
import { integerOption } from "../options.js";

/** The lifecycle flags of `tables create` and `tables alter`, as typed. */
export interface PolicyFlags {
  readonly format?: string;
  readonly writableBuckets?: string;
  readonly archiveAfter?: string;
  readonly expireAfter?: string;
  readonly storageClass?: string;
}

/** `none` unsets a field (`tables alter T --archive-after none`). */
const UNSET = "none";

function unsettable<T>(text: string | undefined, parse: (t: string) => T): T | null | undefined {
  if (text === undefined) return undefined;
  return text.trim().toLowerCase() === UNSET ? null : parse(text);
}

/** The change the flags ask for: only the flags given, `none` unsetting. Bad input: InvalidInputError. */
export function policyChangeOf(flags: PolicyFlags): PolicyChange {
  const change: {
    -readonly [K in keyof PolicyChange]: PolicyChange[K];
  } = {};
  if (flags.format !== undefined) change.format = parseArchiveFormat(flags.format, "--format");
  const writable = unsettable(flags.writableBuckets, (t) =>
    integerOption(t, "--writable-buckets", 1, 1_000_000),
  );
  if (writable !== undefined) change.writableBuckets = writable;
  const archiveAfter = unsettable(flags.archiveAfter, (t) => parseDuration(t, "--archive-after"));
  if (archiveAfter !== undefined) change.archiveAfter = archiveAfter;
  const expireAfter = unsettable(flags.expireAfter, (t) => parseDuration(t, "--expire-after"));
  if (expireAfter !== undefined) change.expireAfter = expireAfter;
  const storageClass = unsettable(flags.storageClass, (t) =>
    parseStorageClass(t, "--storage-class"),
  );
  if (storageClass !== undefined) change.storageClass = storageClass;
  return change;
}

const durationJson = (d: CalendarDuration | null) => (d === null ? null : formatDuration(d));

/** The change as the audit trail records it (durations in their stored form). */
export function policyArguments(change: PolicyChange): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  if (change.format !== undefined) args.format = change.format;
  if (change.writableBuckets !== undefined) args.writable_buckets = change.writableBuckets;
  if (change.archiveAfter !== undefined) args.archive_after = durationJson(change.archiveAfter);
  if (change.expireAfter !== undefined) args.expire_after = durationJson(change.expireAfter);
  if (change.storageClass !== undefined) args.storage_class = change.storageClass;
  return args;
}

/** Said wherever a storage class is set or shown while the archive is a local folder. */
export function storageClassNote(
  archiveKind: "s3" | "file",
  storageClass: StorageClass | null,
): string | null {
  return archiveKind === "file" && storageClass !== null
    ? `note: the archive is a local folder (file store), which has no storage classes: storage_class ${storageClass} is kept in the policy and applies once the archive is S3`
    : null;
}

export async function alterTableCommand(
  tableId: TableId,
  flags: PolicyFlags,
  opts: { json?: boolean },
): Promise<void> {
  const change = policyChangeOf(flags);
  await withRuntime(async (rt) => {
    const action = auditAction("tables alter", tableId, cliCaller(), {
      tableId,
      arguments: policyArguments(change),
    });
    const result = await commitAudited(
      cliAudit(rt),
      action,
      (store) => store.alterTable(tableId, change, rt.clock.now()),
      (r) => ({
        outcome: "done",
        result: { changed: r.changed, policy_version: r.table.policyVersion },
      }),
    );
    const note = storageClassNote(rt.config.archive.kind, result.table.storageClass);
    if (opts.json) {
      printJson({ ...policyJson(result.table), changed: result.changed, note });
      return;
    }
    console.log(
      result.changed.length === 0
        ? `table ${tableId}: unchanged (policy version ${result.table.policyVersion})`
        : `table ${tableId}: ${result.changed.join(", ")} changed; policy version ${result.table.policyVersion}`,
    );
    if (note !== null) console.log(note);
  });
}

/** Every policy field of a table, in its stored form. */
export function policyJson(t: TableDefinition) {
  return {
    table_id: t.tableId,
    strategy: strategyName(t.strategy),
    bucket_strategy: t.strategy,
    format: t.format,
    writable_buckets: t.writableBuckets,
    paused: t.paused,
    archive_after: durationJson(t.archiveAfter),
    expire_after: durationJson(t.expireAfter),
    storage_class: t.storageClass,
    policy_version: t.policyVersion,
    policy_changed_at: t.policyChangedAt.toISOString(),
  };
}

/** The version in which `field` last changed, from the history (oldest first). */
function lastChange(history: readonly PolicyVersion[], field: PolicyField): PolicyVersion | null {
  for (let i = history.length - 1; i >= 0; i--) {
    const v = history[i]!;
    if (v.changed.includes(field) || v.changed.includes("registered")) return v;
  }
  return null;
}

/** A version's whole policy, in its stored form. */
function versionPolicy(v: PolicyVersion) {
  return {
    format: v.format,
    writable_buckets: v.writableBuckets,
    paused: v.paused,
    archive_after: durationJson(v.archiveAfter),
    expire_after: durationJson(v.expireAfter),
    storage_class: v.storageClass,
  };
}

/** A version's policy on one line: every field, `-` for unset. */
function versionSummary(v: PolicyVersion): string {
  return Object.entries(versionPolicy(v))
    .map(([field, value]) => `${field} ${value === null ? "-" : String(value)}`)
    .join(", ");
}

export async function showTableCommand(tableId: TableId, opts: { json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const table = await rt.hotStore.getTable(tableId);
    if (table === null) throw new UnknownTableError(tableId);
    const history = await rt.hotStore.policyHistory(tableId);
    const now = rt.clock.now();
    const base = policyJson(table);
    const fields = POLICY_FIELDS.map((field) => {
      const v = lastChange(history, field);
      return {
        field,
        value: base[field],
        version: v?.version ?? null,
        changed_at: v?.changedAt.toISOString() ?? null,
      };
    });
    const eligibility = explainEligibility(table, rt.config.cutoff, now);
    const note = storageClassNote(rt.config.archive.kind, table.storageClass);
    if (opts.json) {
      printJson({
        ...base,
        fields,
        eligibility,
        history: history.map((v) => ({
          version: v.version,
          changed_at: v.changedAt.toISOString(),
          changed: v.changed,
          policy: versionPolicy(v),
        })),
        note,
      });
      return;
    }
    console.log(
      `table ${tableId} (${strategyName(table.strategy)}), policy version ${table.policyVersion}, last changed ${table.policyChangedAt.toISOString()}`,
    );
    console.log(
      renderTable(
        ["field", "value", "version", "changed at"],
        fields.map((f) => [
          f.field,
          f.value === null ? "(unset)" : String(f.value),
          f.version,
          f.changed_at,
        ]),
      ),
    );
    console.log(
      `\npolicy history (${history.length === 1 ? "1 version" : `${history.length} versions`}; who made each change: \`pulpitum audit --table ${tableId}\`):`,
    );
    console.log(
      renderTable(
        ["version", "changed at", "changed", "policy"],
        history.map((v) => [
          v.version,
          v.changedAt.toISOString(),
          v.changed.join(", "),
          versionSummary(v),
        ]),
      ),
    );
    console.log(`\neligible now: bucket_end <= ${eligibility.cutoff}; ${eligibility.why}`);
    if (table.expireAfter !== null) {
      const cutoff = expireCutoffAt(table, now);
      console.log(
        `expires now: archived buckets with bucket_end <= ${cutoff!.toISOString()} (expire_after ${formatDuration(table.expireAfter)}); ` +
          "records are deleted only after they were archived, and never under Object Lock (docs/lifecycle.md, Expiry)",
      );
    }
    if (note !== null) console.log(note);
  });
}
