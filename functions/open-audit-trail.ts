/**
 * The audit trail alone, for the DLQ replay function: the database from
 * DATABASE_SECRET_ARN (or DATABASE_URL), one connection, no archive or
 * queue adapters. Like every function it refuses a schema behind its code
 * (functions/open-adapters.ts), so a replay never runs where its record
 * could not be written.
 */
import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { SqlAuditTrail } from "../src/adapters/sql/audit-trail.js";
import { openPgHotStore } from "../src/adapters/sql/index.js";
import { ConfigError } from "../src/errors.js";
import { loadConfig, pgConnection, pgTimeouts } from "../src/open-adapters.js";
import type { AuditTrail } from "../src/ports/audit-trail.js";
import type { Env } from "../src/config/variables.js";
import { containerSecretsClient, resolveDatabaseEnv } from "./database-secret.js";
import { requireCurrentSchema } from "./open-adapters.js";

export interface OpenedAuditTrail {
  readonly audit: AuditTrail;
  close(): Promise<void>;
}

export async function openAuditTrail(
  env: Env = process.env,
  clients: { secrets?: SecretsManagerClient } = {},
): Promise<OpenedAuditTrail> {
  const region = env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  const config = loadConfig(
    await resolveDatabaseEnv(env, () => clients.secrets ?? containerSecretsClient(region)),
  );
  if (config.database.kind !== "postgres") {
    throw new ConfigError([
      {
        variable: "DATABASE_URL",
        value: undefined,
        accepted:
          "the deployment's database (DATABASE_URL or DATABASE_SECRET_ARN): a DLQ replay records what it moves in the audit trail there",
      },
    ]);
  }
  const { url, ssl } = pgConnection(config.database);
  const store = await openPgHotStore(url, { max: 1, timeouts: pgTimeouts(config), pool: { ssl } });
  await requireCurrentSchema(store.db, () => store.close());
  return { audit: new SqlAuditTrail(store.db), close: () => store.close() };
}
