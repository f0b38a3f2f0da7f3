import { describe, expect, it } from "vitest";
import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import {
  cachedPerContainer,
  databaseUrlFromSecret,
  openLambdaAdapters,
  resolveDatabaseEnv,
} from "../../../functions/open-adapters.js";
import { openDeadLetters } from "../../../functions/open-dead-letters.js";
import { ConfigError } from "../../../src/errors.js";

const SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:pulpitum/db-AbCdEf";

function configErrorFrom(action: () => unknown): ConfigError {
  try {
    action();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("the database URL held by a Secrets Manager secret", () => {
  it("is the url field of a JSON secret", () => {
    expect(databaseUrlFromSecret('{"url":"postgresql://app:pw@db:5432/app"}', SECRET)).toBe(
      "postgresql://app:pw@db:5432/app",
    );
  });

  it("is built from the RDS fields, escaping user, password and database name", () => {
    const url = databaseUrlFromSecret(
      JSON.stringify({
        engine: "postgres",
        username: "app user",
        password: "p@ss:w/rd?",
        host: "db.cluster.eu-west-1.rds.amazonaws.com",
        port: 5433,
        dbname: "app-db",
        sslmode: "verify-full",
      }),
      SECRET,
    );
    const parsed = new URL(url);
    expect(parsed.protocol).toBe("postgresql:");
    expect(decodeURIComponent(parsed.username)).toBe("app user");
    expect(decodeURIComponent(parsed.password)).toBe("p@ss:w/rd?");
    expect(parsed.host).toBe("db.cluster.eu-west-1.rds.amazonaws.com:5433");
    expect(parsed.pathname).toBe("/app-db");
    expect(parsed.searchParams.get("sslmode")).toBe("verify-full");
  });

  it("defaults the port to 5432 and accepts a bare URL", () => {
    expect(
      new URL(
        databaseUrlFromSecret('{"username":"u","password":"p","host":"h","dbname":"d"}', SECRET),
      ).port,
    ).toBe("5432");
    expect(databaseUrlFromSecret("postgres://u@h/d", SECRET)).toBe("postgres://u@h/d");
  });

  it("names the secret and the missing field, never the secret's content", () => {
    const error = configErrorFrom(() =>
      databaseUrlFromSecret(
        '{"username":"pulpitum","password":"hunter2-very-secret","host":"","port":5432,"dbname":"pulpitum"}',
        SECRET,
      ),
    );
    expect(error.message).toContain(SECRET);
    expect(error.message).toContain('"host" is missing or not a non-empty string');
    expect(error.message).not.toContain("hunter2");
    expect(configErrorFrom(() => databaseUrlFromSecret("hunter2", SECRET)).message).not.toContain(
      "hunter2",
    );
    expect(
      configErrorFrom(() => databaseUrlFromSecret('{"url":"mysql://x"}', SECRET)).message,
    ).toContain('"url" is not a postgres');
  });

  it("is refused together with DATABASE_URL", async () => {
    await expect(
      resolveDatabaseEnv(
        { DATABASE_SECRET_ARN: SECRET, DATABASE_URL: "postgres://u@h/d" },
        () => new SecretsManagerClient({}),
      ),
    ).rejects.toThrow(/set either DATABASE_SECRET_ARN or DATABASE_URL, not both/);
  });

  it("leaves the environment alone without DATABASE_SECRET_ARN", async () => {
    const env = { DATABASE_URL: "postgres://u@h/d" };
    expect(
      await resolveDatabaseEnv(env, () => {
        throw new Error("no client needed");
      }),
    ).toBe(env);
  });
});

describe("the Lambda runtime", () => {
  it("refuses the embedded defaults, which do not survive a Lambda container", async () => {
    await expect(openLambdaAdapters({ PULPITUM_HOME: "/tmp/pulpitum-test" })).rejects.toThrow(
      /DATABASE_URL: a Lambda function needs an external database/,
    );
  });

  it("refuses a deployment without a work queue", async () => {
    await expect(
      openLambdaAdapters({
        DATABASE_URL: "postgresql://u@127.0.0.1:1/d",
        PULPITUM_ARCHIVE_URL: "s3://archive-bucket/p",
      }),
    ).rejects.toThrow(/PULPITUM_WORK_QUEUE_URL: the URL of the work queue/);
  });

  it("names both queue variables the replay function needs", () => {
    expect(() => openDeadLetters({})).toThrow(
      /PULPITUM_WORK_QUEUE_URL: an SQS queue URL\nPULPITUM_DLQ_URL: an SQS queue URL/,
    );
  });

  it("is opened once per container, and opened again after a failed open", async () => {
    let opens = 0;
    const open = cachedPerContainer(async () => {
      opens++;
      if (opens === 1) throw new Error("database unreachable");
      return { opened: opens };
    });
    await expect(open()).rejects.toThrow("database unreachable");
    expect(await open()).toEqual({ opened: 2 });
    expect(await open()).toEqual({ opened: 2 });
    expect(opens).toBe(2);
  });
});
