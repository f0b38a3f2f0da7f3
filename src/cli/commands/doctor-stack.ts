/**
 * `pulpitum doctor --stack-outputs FILE`: the preflight of a deployed stack.
 * The Outputs of `cdk deploy --outputs-file FILE` or of `aws cloudformation
 * describe-stacks` name what the functions use (infra/outputs.ts,
 * PREFLIGHT_OUTPUTS); the doctor then checks exactly that: the database
 * through the secret's credentials (the functions' role, at the latest
 * migration), the archive bucket and prefix, both queues, and the discovery
 * schedule's rule (EventBridge DescribeRule, which emulators such as moto
 * answer too); then every function is invoked with the probe event and
 * answers from inside its subnets, with its role (./doctor-probes.ts).
 */
import { readFile } from "node:fs/promises";
import { ConfigError, InvalidInputError, errorMessage } from "../../errors.js";
import type { CheckResult } from "./doctor.js";

/** The Outputs the preflight reads; infra/outputs.ts defines them. */
export const STACK_OUTPUT_KEYS = [
  "DatabaseSecretArn",
  "ArchiveUrl",
  "WorkQueueUrl",
  "DeadLetterQueueUrl",
  "DiscoveryScheduleName",
] as const;
type StackOutputKey = (typeof STACK_OUTPUT_KEYS)[number];

export const STACK_OUTPUTS_FORM =
  'the JSON of `cdk deploy --outputs-file FILE` ({"STACK":{"WorkQueueUrl":…}}) or of `aws cloudformation describe-stacks --stack-name STACK` ({"Stacks":[{"StackName":…,"Outputs":[{"OutputKey":…,"OutputValue":…}]}]})';

export interface StackOutputs {
  readonly stackName: string;
  readonly values: Readonly<Record<StackOutputKey, string>>;
  /** Every Output of the stack (the functions' names among them). */
  readonly all: Readonly<Record<string, unknown>>;
}

/** The one stack's Outputs in `file`; `stack` picks one when the file holds several. */
export async function readStackOutputs(file: string, stack?: string): Promise<StackOutputs> {
  const input = `--stack-outputs ${file}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, "utf8"));
  } catch (error) {
    throw new InvalidInputError(
      input,
      `cannot be read as JSON (${errorMessage(error)})`,
      STACK_OUTPUTS_FORM,
    );
  }
  const stacks = stacksIn(parsed);
  if (stacks === null)
    throw new InvalidInputError(
      input,
      "holds neither form of a stack's Outputs",
      STACK_OUTPUTS_FORM,
    );
  const names = Object.keys(stacks);
  const chosen = stack ?? (names.length === 1 ? names[0] : undefined);
  if (chosen === undefined || stacks[chosen] === undefined)
    throw new InvalidInputError(
      stack === undefined ? input : `--stack ${stack}`,
      stack === undefined
        ? `holds the Outputs of ${names.length} stacks (${names.join(", ")})`
        : `is not in ${file} (it holds ${names.join(", ") || "no stack"})`,
      "--stack NAME naming one of them",
    );
  const outputs = stacks[chosen];
  const missing = STACK_OUTPUT_KEYS.filter(
    (k) => typeof outputs[k] !== "string" || outputs[k] === "",
  );
  if (missing.length > 0)
    throw new InvalidInputError(
      input,
      `has no ${missing.join(", ")} among the Outputs of stack ${chosen}`,
      "the Outputs of a Pulpitum stack of this version (redeploy it, or read them again after `cdk deploy`)",
    );
  return { stackName: chosen, values: outputs as Record<StackOutputKey, string>, all: outputs };
}

/** Stack name → output key → value, from either form; null when neither fits. */
function stacksIn(parsed: unknown): Record<string, Record<string, unknown>> | null {
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return null;
  const o = parsed as Record<string, unknown>;
  if (Array.isArray(o.Stacks)) {
    const stacks: Record<string, Record<string, unknown>> = {};
    for (const s of o.Stacks as Array<Record<string, unknown>>) {
      if (typeof s?.StackName !== "string" || !Array.isArray(s.Outputs)) return null;
      stacks[s.StackName] = Object.fromEntries(
        (s.Outputs as Array<Record<string, unknown>>).map((out) => [
          out.OutputKey,
          out.OutputValue,
        ]),
      );
    }
    return stacks;
  }
  const values = Object.values(o);
  if (values.length === 0 || values.some((v) => typeof v !== "object" || v === null)) return null;
  return o as Record<string, Record<string, unknown>>;
}

/** The region an ARN names (`arn:aws:secretsmanager:REGION:…`). */
export function regionOfArn(arn: string): string | undefined {
  const region = arn.split(":")[3];
  return region === undefined || region === "" ? undefined : region;
}

/**
 * The environment the deployed functions see, as far as the doctor needs
 * it: the database URL read from the stack's secret, the archive and the
 * queues from the Outputs. Also returns the check of the secret itself:
 * readable, and holding a connection (not the empty host of a secret the
 * stack created and nobody filled).
 */
export async function stackEnvironment(
  outputs: StackOutputs,
  env: NodeJS.ProcessEnv,
): Promise<{ env: NodeJS.ProcessEnv; checks: CheckResult[] }> {
  const v = outputs.values;
  const region = env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? regionOfArn(v.DatabaseSecretArn);
  const replaced = [
    "DATABASE_URL",
    "PULPITUM_ARCHIVE_URL",
    "PULPITUM_WORK_QUEUE_URL",
    "PULPITUM_DLQ_URL",
  ].filter((name) => env[name] !== undefined && env[name] !== "");
  const stackEnv: NodeJS.ProcessEnv = {
    ...env,
    AWS_REGION: region,
    PULPITUM_ARCHIVE_URL: v.ArchiveUrl,
    PULPITUM_WORK_QUEUE_URL: v.WorkQueueUrl,
    PULPITUM_DLQ_URL: v.DeadLetterQueueUrl,
  };
  delete stackEnv.DATABASE_URL;
  const checks: CheckResult[] = [
    {
      check: "stack outputs",
      status: "ok",
      detail:
        `stack ${outputs.stackName} in ${region ?? "(no region)"}: its secret, archive and queues` +
        (replaced.length === 0 ? "" : ` (in place of ${replaced.join(", ")} from the environment)`),
    },
  ];
  const secret = await secretCheck(v.DatabaseSecretArn, region);
  checks.push(secret.check);
  if (secret.databaseUrl !== undefined) stackEnv.DATABASE_URL = secret.databaseUrl;
  return { env: stackEnv, checks };
}

/** The fix for a secret without a usable connection. */
export function fillSecretFix(arn: string): string {
  return `put the app role's connection in the secret: aws secretsmanager put-secret-value --secret-id ${arn} --secret-string '{"url":"postgresql://pulpitum_app:PASSWORD@HOST:5432/DATABASE"}'`;
}

async function secretCheck(
  arn: string,
  region: string | undefined,
): Promise<{ check: CheckResult; databaseUrl?: string }> {
  const [{ SecretsManagerClient, GetSecretValueCommand }, { databaseUrlFromSecret }] =
    await Promise.all([
      import("@aws-sdk/client-secrets-manager"),
      // The functions' own reading of the secret's two forms.
      import("../../../functions/database-secret.js"),
    ]);
  const client = new SecretsManagerClient({ region });
  let value: string | undefined;
  try {
    value = (await client.send(new GetSecretValueCommand({ SecretId: arn }))).SecretString;
  } catch (error) {
    return {
      check: {
        check: "database secret",
        status: "fail",
        detail: `${arn}: GetSecretValue failed: ${errorMessage(error)}`,
        fix: "allow secretsmanager:GetSecretValue on the secret for these credentials, and check AWS_REGION",
      },
    };
  } finally {
    client.destroy();
  }
  try {
    if (value === undefined) throw new Error("the secret has no string value");
    const url = databaseUrlFromSecret(value, arn);
    const parsed = new URL(url);
    return {
      check: {
        check: "database secret",
        status: "ok",
        detail: `${arn}: user ${decodeURIComponent(parsed.username) || "(none)"} at ${parsed.host}${parsed.pathname}`,
      },
      databaseUrl: url,
    };
  } catch (error) {
    const why =
      error instanceof ConfigError
        ? error.problems.map((p) => p.accepted).join("; ")
        : errorMessage(error);
    return {
      check: {
        check: "database secret",
        status: "fail",
        detail: `${arn} holds no usable connection: ${why}`,
        fix: fillSecretFix(arn),
      },
    };
  }
}

/** The discovery schedule's rule exists and is enabled (EventBridge DescribeRule). */
export async function scheduleCheck(
  ruleName: string,
  region: string | undefined,
): Promise<CheckResult> {
  const { EventBridgeClient, DescribeRuleCommand } = await import("@aws-sdk/client-eventbridge");
  const client = new EventBridgeClient({ region });
  try {
    const rule = await client.send(new DescribeRuleCommand({ Name: ruleName }));
    if (rule.State === "ENABLED")
      return {
        check: "schedule",
        status: "ok",
        detail: `${ruleName}: enabled, ${rule.ScheduleExpression ?? "no schedule expression"}`,
      };
    return {
      check: "schedule",
      status: "fail",
      detail: `${ruleName} is ${rule.State ?? "in no state"}: discovery does not run, so nothing is archived`,
      fix: `aws events enable-rule --name ${ruleName}`,
    };
  } catch (error) {
    const notFound = (error as { name?: string }).name === "ResourceNotFoundException";
    return {
      check: "schedule",
      status: "fail",
      detail: `${ruleName}: ${errorMessage(error)}`,
      fix: notFound
        ? "the rule the DiscoveryScheduleName output names does not exist in this region: deploy the stack (`npx cdk deploy`), or set AWS_REGION to the stack's"
        : "allow events:DescribeRule for these credentials, and check AWS_REGION",
    };
  } finally {
    client.destroy();
  }
}
