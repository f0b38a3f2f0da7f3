import { describe, expect, it } from "vitest";
import { CONFIG_VARIABLES, parseConfig } from "../../../src/config/config.js";
import { ConfigError } from "../../../src/errors.js";
import { pgTimeouts, s3Timeouts, sqsTimeouts } from "../../../src/open-adapters.js";

const parse = (env: Record<string, string>) => parseConfig(env, { cwd: "/srv/app" });

function configError(env: Record<string, string>): ConfigError {
  try {
    parse(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

const VARIABLES = [
  "PULPITUM_DB_CONNECT_TIMEOUT_SECONDS",
  "PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS",
  "PULPITUM_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS",
  "PULPITUM_S3_CONNECT_TIMEOUT_SECONDS",
  "PULPITUM_S3_REQUEST_TIMEOUT_SECONDS",
  "PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS",
  "PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS",
];

describe("client timeouts", () => {
  it("default to finite bounds on every database, S3 and SQS call, each documented", () => {
    // Act
    const config = parse({});

    // Assess
    expect(config.timeouts).toEqual({
      databaseConnectSeconds: 10,
      databaseStatementSeconds: 60,
      databaseIdleInTransactionSeconds: 60,
      s3ConnectSeconds: 10,
      s3RequestSeconds: 30,
      sqsConnectSeconds: 10,
      sqsRequestSeconds: 30,
    });
    expect(Object.isFrozen(config.timeouts)).toBe(true);
    expect(CONFIG_VARIABLES.map((v) => v.name)).toEqual(expect.arrayContaining(VARIABLES));
  });

  it("reach the pg pool and the AWS clients in milliseconds", () => {
    // Prepare
    const config = parse({
      PULPITUM_DB_CONNECT_TIMEOUT_SECONDS: "2.5",
      PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS: "0",
      PULPITUM_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS: "7",
      PULPITUM_S3_CONNECT_TIMEOUT_SECONDS: "3",
      PULPITUM_S3_REQUEST_TIMEOUT_SECONDS: "4",
      PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS: "5",
      PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS: "21",
    });

    // Act / Assess
    expect(pgTimeouts(config)).toEqual({
      connectMs: 2500,
      statementMs: 0,
      idleInTransactionMs: 7000,
    });
    expect(s3Timeouts(config)).toEqual({ connectTimeoutMs: 3000, requestTimeoutMs: 4000 });
    expect(sqsTimeouts(config)).toEqual({ connectTimeoutMs: 5000, requestTimeoutMs: 21000 });
  });

  it.each([
    "PULPITUM_DB_CONNECT_TIMEOUT_SECONDS",
    "PULPITUM_S3_CONNECT_TIMEOUT_SECONDS",
    "PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS",
  ])("%s refuses 0: a connection attempt must end", (variable) => {
    expect(configError({ [variable]: "0" }).message).toBe(
      `${variable}="0" is invalid: a number of seconds > 0 and at most 31536000 (one year), such as 60`,
    );
  });

  it.each(VARIABLES)("%s refuses a value that is not a number of seconds", (variable) => {
    const error = configError({ [variable]: "5s" });
    expect(error.problems.map((p) => p.variable)).toEqual([variable]);
    expect(error.message).toContain(`${variable}="5s" is invalid: a number of seconds`);
  });

  it("refuses an SQS request timeout a silent long poll would trip, and accepts 0 or longer ones", () => {
    expect(configError({ PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS: "20" }).message).toBe(
      'PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS="20" is invalid: 0 (no timeout) or a number of seconds > 20 (the longest SQS long poll) and at most 31536000',
    );
    expect(parse({ PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS: "0" }).timeouts.sqsRequestSeconds).toBe(0);
    expect(parse({ PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS: "20.5" }).timeouts.sqsRequestSeconds).toBe(
      20.5,
    );
  });
});
