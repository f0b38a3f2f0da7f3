/**
 * Refusals an operator meets on a first deploy, as messages that name the
 * role, the missing migration or the missing queue and the fix, in place of
 * the server's bare text: "permission denied for schema public" (`migrate`
 * run as the app role), "permission denied for table …" (a write as the
 * reader role), "relation … does not exist" (any command before `migrate`),
 * "The specified queue does not exist" (`invoke` or `dlq replay` against an
 * emulator where nobody created the queues). The roles are those of
 * `pulpitum roles print` (src/adapters/sql/roles.ts).
 */
import { describeServer } from "../adapters/sql/connection-error.js";
import { DEFAULT_ROLE_NAMES } from "../adapters/sql/roles.js";
import { PulpitumError } from "../errors.js";

const INSUFFICIENT_PRIVILEGE = "42501";
const UNDEFINED_TABLE = "42P01";

/** The database refused the command's work; the message says which role can do it. */
export class DatabaseRoleError extends PulpitumError {}

/** A queue the configuration names does not exist; the message says how to create or find it. */
export class MissingQueueError extends PulpitumError {}

/** The first SQLSTATE-carrying error in the cause chain, with its server message. */
function sqlError(error: unknown): { code: string; message: string } | null {
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code))
      return { code, message: String(message) };
    e = (e as { cause?: unknown }).cause;
  }
  return null;
}

/** Commands that only read Pulpitum's tables: the reader role may run them. */
const READ_ONLY = new Set([
  "read",
  "export",
  "query",
  "status",
  "buckets",
  "plan",
  "verify",
  "doctor",
  "erasures",
]);

/**
 * A message naming the role and the fix for a privilege or missing-schema
 * refusal of `command` (the first word after `pulpitum`), or null when the
 * error is neither.
 */
export function explainSetupError(
  error: unknown,
  command: string,
  env: NodeJS.ProcessEnv = process.env,
): PulpitumError | null {
  return explainMissingQueue(error, env) ?? explainDatabaseError(error, command, env);
}

/** The error names a queue that does not exist (SQS's QueueDoesNotExist, as AWS and emulators say it). */
function isMissingQueue(error: unknown): boolean {
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    const { name, Code, message } = e as { name?: unknown; Code?: unknown; message?: unknown };
    if (
      [name, Code].some(
        (n) => n === "QueueDoesNotExist" || n === "AWS.SimpleQueueService.NonExistentQueue",
      ) ||
      /specified queue does not exist/i.test(String(message))
    )
      return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

function explainMissingQueue(error: unknown, env: NodeJS.ProcessEnv): MissingQueueError | null {
  if (!isMissingQueue(error)) return null;
  const queues = (
    [
      ["PULPITUM_WORK_QUEUE_URL", "WorkQueueUrl"],
      ["PULPITUM_DLQ_URL", "DeadLetterQueueUrl"],
    ] as const
  ).filter(([variable]) => env[variable]?.trim());
  const endpoint = env.AWS_ENDPOINT_URL?.trim();
  const names = queues.map(([variable, output]) => {
    const url = env[variable]!.trim();
    const name =
      url
        .split("/")
        .filter((s) => s !== "")
        .at(-1) ?? url;
    return endpoint
      ? `\`aws --endpoint-url ${endpoint} sqs create-queue --queue-name ${name}\` (${variable})`
      : `${variable}=${url} should be the stack's ${output} output`;
  });
  return new MissingQueueError(
    `a queue the configuration names does not exist (${String((error as Error).message)}): ` +
      (endpoint
        ? `on the emulator at AWS_ENDPOINT_URL, create the queues first: ${names.join("; ")}`
        : `check ${names.join("; ")}, and AWS_REGION`),
    { cause: error },
  );
}

function explainDatabaseError(
  error: unknown,
  command: string,
  env: NodeJS.ProcessEnv,
): DatabaseRoleError | null {
  const sql = sqlError(error);
  if (sql === null) return null;
  const url = env.DATABASE_URL?.trim();
  const role = url ? `role ${describeServer(url).user}` : "this role";
  const { migrator, app, reader } = DEFAULT_ROLE_NAMES;
  if (sql.code === UNDEFINED_TABLE && /pulpitum_v4_/.test(sql.message))
    return new DatabaseRoleError(
      `the database has no Pulpitum schema yet (${sql.message}): run \`pulpitum migrate\` first, as the migrator role ` +
        `(DATABASE_URL naming ${migrator}; \`pulpitum roles print\` creates the roles); \`pulpitum doctor\` checks the schema`,
      { cause: error },
    );
  if (sql.code !== INSUFFICIENT_PRIVILEGE) return null;
  if (command === "migrate" || /for schema/.test(sql.message))
    return new DatabaseRoleError(
      `${role} may not create or alter Pulpitum's tables (${sql.message}): run \`pulpitum migrate\` as the migrator role, ` +
        `with DATABASE_URL naming ${migrator} (\`pulpitum roles print\` prints the SQL that creates the roles; run it once as a superuser)`,
      { cause: error },
    );
  const needs = READ_ONLY.has(command)
    ? `\`pulpitum ${command}\` needs SELECT on Pulpitum's tables: the reader role (${reader}) or the app role (${app})`
    : `\`pulpitum ${command}\` writes, so it needs the app role (${app}); the reader role (${reader}) may only read (read, export, query, status)`;
  return new DatabaseRoleError(
    `${role} may not do this command's work (${sql.message}): ${needs}. Set DATABASE_URL to that role (\`pulpitum roles print\` creates the roles and their grants); \`pulpitum doctor\` shows what the role may do`,
    { cause: error },
  );
}
