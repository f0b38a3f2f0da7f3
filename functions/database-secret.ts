/**
 * The database secret of a Lambda function (`DATABASE_SECRET_ARN`): its
 * value's two forms, read into the `DATABASE_URL` the adapters open, and the
 * fingerprint a warm container compares to follow a rotation.
 *
 * The value is never logged, and errors about it name the secret, never its
 * content. It is read through Powertools' parameters cache, one per Secrets
 * Manager client (one client per container): the rotation check forces a
 * read at each refresh interval, and the adapters it then reopens take that
 * same value from the cache, so they open on exactly the credentials the
 * check saw, with one GetSecretValue per check.
 */
import { createHash } from "node:crypto";
import { SecretsProvider } from "@aws-lambda-powertools/parameters/secrets";
import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import * as v from "valibot";
import { ConfigError, errorMessage } from "../src/errors.js";
import { parseFunctionSettings } from "../src/config/function-settings.js";
import { fields, readOrProblem, type JsonObject } from "../src/input.js";
import type { Env } from "../src/config/variables.js";
import { traceClient } from "./observability.js";

export const SECRET_FORM =
  'a JSON secret {"url":"postgresql://…"} or {"username","password","host","port","dbname"[,"sslmode"]} (the RDS form), or a bare postgresql:// URL';

/**
 * The database URL held by a secret's value. Throws ConfigError naming the
 * secret (never its content) when the value has neither form.
 */
export function databaseUrlFromSecret(secretString: string, secretName: string): string {
  const bad = (problem: string): never => {
    throw new ConfigError([
      {
        variable: "DATABASE_SECRET_ARN",
        value: secretName,
        accepted: `${problem}; expected ${SECRET_FORM}`,
      },
    ]);
  };
  const text = secretString.trim();
  if (/^postgres(ql)?:\/\//.test(text)) return text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return bad("the secret value is neither JSON nor a postgres URL");
  }
  const secret = readOrProblem(SECRET_FIELDS, parsed);
  if (!secret.ok) return bad(secret.problem);
  const s = secret.value;
  if (s.url !== undefined) return s.url;
  const rds = readOrProblem(RDS_SECRET, s);
  if (!rds.ok) return bad(rds.problem);
  const { username, password, host, dbname, port } = rds.value;
  const url = new URL(`postgresql://${host.includes(":") ? `[${host}]` : host}:${port}/`);
  url.username = encodeURIComponent(username);
  url.password = encodeURIComponent(password);
  url.pathname = `/${encodeURIComponent(dbname)}`;
  const sslmode = readOrProblem(SSLMODE, s);
  if (!sslmode.ok) return bad(sslmode.problem);
  if (sslmode.value.sslmode !== undefined) url.searchParams.set("sslmode", sslmode.value.sslmode);
  return url.toString();
}

const POSTGRES_URL = /^postgres(ql)?:\/\//;

const SECRET_FIELDS = v.pipe(
  v.custom<JsonObject>(
    (value) => typeof value === "object" && value !== null && !Array.isArray(value),
    "the secret value is not a JSON object",
  ),
  fields({
    url: v.optional(
      v.custom<string>(
        (url) => typeof url === "string" && POSTGRES_URL.test(url),
        '"url" is not a postgres:// or postgresql:// URL',
      ),
    ),
  }),
);

const rdsField = (name: string) =>
  v.custom<string>(
    (value) => typeof value === "string" && value !== "",
    `the secret has no "url" and its "${name}" is missing or not a non-empty string`,
  );

/** The RDS form; `port` as RDS writes it, a number or a numeric string. */
const RDS_SECRET = fields({
  username: rdsField("username"),
  password: rdsField("password"),
  host: rdsField("host"),
  dbname: rdsField("dbname"),
  port: v.pipe(
    v.unknown(),
    v.transform((port): number => (port === undefined ? 5432 : Number(port))),
    v.check(
      (port) => Number.isInteger(port) && port >= 1 && port <= 65535,
      '"port" is not a TCP port number',
    ),
  ),
});

const SSLMODE = fields({ sslmode: v.optional(v.string('"sslmode" is not a string')) });

/** The environment with `DATABASE_URL` filled in from `DATABASE_SECRET_ARN` when that is set. */
export async function resolveDatabaseEnv(
  env: Env,
  secrets: () => SecretsManagerClient,
): Promise<Env> {
  const arn = env.DATABASE_SECRET_ARN?.trim();
  if (!arn) return env;
  if (env.DATABASE_URL?.trim()) {
    throw new ConfigError([
      {
        variable: "DATABASE_SECRET_ARN",
        value: arn,
        accepted: "set either DATABASE_SECRET_ARN or DATABASE_URL, not both",
      },
    ]);
  }
  let secretString: string | undefined;
  try {
    const value = await secretsProvider(secrets()).get(arn, {
      maxAge: parseFunctionSettings(env).secretRefreshMs / 1000,
    });
    secretString = typeof value === "string" ? value : undefined;
  } catch (error) {
    throw new ConfigError([
      {
        variable: "DATABASE_SECRET_ARN",
        value: arn,
        accepted: `a readable Secrets Manager secret (GetSecretValue failed: ${errorMessage(error)})`,
      },
    ]);
  }
  if (secretString === undefined) {
    throw new ConfigError([
      {
        variable: "DATABASE_SECRET_ARN",
        value: arn,
        accepted: `a secret with a string value; expected ${SECRET_FORM}`,
      },
    ]);
  }
  return { ...env, DATABASE_URL: databaseUrlFromSecret(secretString, arn) };
}

/**
 * A fingerprint of the database secret's current value (undefined without
 * DATABASE_SECRET_ARN): it changes when the secret is rotated.
 */
export async function databaseSecretVersion(
  env: Env,
  secrets: SecretsManagerClient,
): Promise<string | undefined> {
  const arn = env.DATABASE_SECRET_ARN?.trim();
  if (!arn) return undefined;
  const value = await secretsProvider(secrets).get(arn, {
    forceFetch: true,
    maxAge: parseFunctionSettings(env).secretRefreshMs / 1000,
  });
  return createHash("sha256")
    .update(typeof value === "string" ? value : "")
    .digest("hex");
}

const providers = new WeakMap<SecretsManagerClient, SecretsProvider>();

/** The parameters cache of `client`: the rotation check and the opens it triggers share it. */
function secretsProvider(client: SecretsManagerClient): SecretsProvider {
  let provider = providers.get(client);
  if (provider === undefined) {
    provider = new SecretsProvider({ awsSdkV3Client: client });
    providers.set(client, provider);
  }
  return provider;
}

const containerClients = new Map<string, SecretsManagerClient>();

/** The container's Secrets Manager client for `region`, kept for the container's life with its cache. */
export function containerSecretsClient(region: string | undefined): SecretsManagerClient {
  const key = region ?? "";
  let client = containerClients.get(key);
  if (client === undefined) {
    client = traceClient(new SecretsManagerClient({ region }));
    containerClients.set(key, client);
  }
  return client;
}
