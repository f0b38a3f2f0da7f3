/**
 * Which `ARCHIVER_*` and `PULPITUM_*` variables something reads, and a
 * warning for each one nothing does (a typo such as `ARCHIVER_WORKER=4`
 * would otherwise be ignored in silence).
 */
import { CONFIG_VARIABLES } from "./table.js";
import { OBSOLETE_VARIABLES } from "./config.js";
import { DISCOVERY_VARIABLES } from "./discovery-settings.js";
import { FUNCTION_VARIABLES } from "./function-settings.js";
import type { Env } from "./variables.js";

/**
 * Variables with these prefixes that are read somewhere other than
 * {@link parseConfig}: the CLI, the Lambda functions and the CDK app
 * (infra/app-props.ts). Anything else under the prefixes is a typo or a
 * leftover, and is reported by {@link unknownVariableWarnings}.
 */
export const OTHER_VARIABLES: ReadonlyArray<{ name: string; rule: string }> = [
  { name: "PULPITUM_LOG", rule: "debug: also log every phase outcome and detail on stderr" },
  { name: "PULPITUM_DEBUG", rule: "any value: print the stack of an unexpected failure" },
  ...[
    "STACK_NAME",
    "ARCHIVE_PREFIX",
    "ARCHIVE_BUCKET_NAME",
    "DATABASE_SECRET_ARN",
    "WORKER_DATABASE_SECRET_ARN",
    "MAINTENANCE_DATABASE_SECRET_ARN",
    "ERASE_DATABASE_SECRET_ARN",
    "REPLAY_DATABASE_SECRET_ARN",
    "RESTORE_DATABASE_SECRET_ARN",
    "VPC_ID",
    "SUBNET_IDS",
    "SECURITY_GROUP_ID",
    "AVAILABILITY_ZONES",
    "ROUTE_TABLE_IDS",
    "S3_ROUTE",
    "AWS_SERVICES",
    "ARCHIVE_KMS_KEY",
    "OBJECT_LOCK_RETENTION_DAYS",
    "OBJECT_LOCK_MODE",
    "SCHEDULE_MINUTES",
    "MAX_RECEIVE_COUNT",
    "WORKER_TIMEOUT_SECONDS",
    "WORKER_MEMORY_MB",
    "WORKER_BATCH_SIZE",
    "WORKER_BATCHING_WINDOW_SECONDS",
    "WORKER_MAX_CONCURRENCY",
    "DATABASE_POOL_MAX",
    "RESERVE_CONCURRENCY",
    "DATABASE_CONNECTION_BUDGET",
    "ALARM_TOPIC_ARN",
    "QUERY_CATALOG",
    "GLUE_DATABASE_NAME",
    "QUERY_BYTES_SCANNED_CUTOFF_GB",
    "QUERY_RESULTS_RETENTION_DAYS",
    "PAYLOAD_TRANSITION_DAYS",
    "PAYLOAD_STORAGE_CLASS",
  ].map((suffix) => ({
    name: `PULPITUM_${suffix}`,
    rule: "a setting of the CDK app (cdk synth/deploy)",
  })),
];

/** Values `PULPITUM_LOG` accepts. */
export const LOG_LEVELS = ["debug"] as const;

/**
 * One warning per `ARCHIVER_*` or `PULPITUM_*` variable that nothing reads
 * (with the closest known name), and per unknown `PULPITUM_LOG` level. A
 * typo such as `ARCHIVER_WORKER=4` would otherwise be ignored in silence.
 */
export function unknownVariableWarnings(env: Env): string[] {
  const known = new Set([
    ...CONFIG_VARIABLES.map((v) => v.name),
    ...DISCOVERY_VARIABLES.map((v) => v.name),
    ...FUNCTION_VARIABLES.map((v) => v.name),
    ...Object.keys(OBSOLETE_VARIABLES),
    ...OTHER_VARIABLES.map((v) => v.name),
  ]);
  const warnings: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!/^(ARCHIVER|PULPITUM)_/.test(name) || known.has(name)) continue;
    const closest = closestName(name, known);
    warnings.push(
      `${name} is not a variable Pulpitum reads and is ignored` +
        (closest === undefined ? "" : `; did you mean ${closest}?`),
    );
  }
  const level = env.PULPITUM_LOG?.trim();
  if (level !== undefined && level !== "" && !(LOG_LEVELS as readonly string[]).includes(level)) {
    warnings.push(
      `PULPITUM_LOG=${JSON.stringify(level)} is not a known level and is ignored; accepted: ${LOG_LEVELS.join(", ")}`,
    );
  }
  return warnings;
}

/** The known name within edit distance 3 of `name`, if one is clearly closest. */
function closestName(name: string, known: ReadonlySet<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = 4;
  for (const candidate of known) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}
