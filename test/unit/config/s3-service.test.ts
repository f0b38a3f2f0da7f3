/**
 * The settings that name an S3 archive's service in its identity
 * (domain/archive-identity.ts): the endpoint, the region (AWS's partition)
 * and PULPITUM_S3_SERVICE, read once and validated against each other.
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/config.js";
import { ConfigError } from "../../../src/errors.js";
import { archiveInUse } from "../../../src/open-adapters.js";

type Env = Record<string, string | undefined>;

const EXTERNAL: Env = {
  DATABASE_URL: "postgresql://archiver@127.0.0.1:5432/app",
  PULPITUM_ARCHIVE_URL: "s3://pulpitum-archive/records",
};
const parse = (env: Env) => parseConfig(env, { cwd: "/srv/app" });

function problemsOf(env: Env): { variable: string; value?: string; accepted: string }[] {
  try {
    parse(env);
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

describe("the S3 service of the archive's identity", () => {
  it("reads the region, the endpoint and PULPITUM_S3_SERVICE into the archive's location", () => {
    // Act
    const archive = parse({
      ...EXTERNAL,
      AWS_DEFAULT_REGION: "cn-north-1",
      AWS_ENDPOINT_URL_S3: "http://10.0.0.5:9000",
      AWS_ENDPOINT_URL: "http://127.0.0.1:4566",
      PULPITUM_S3_SERVICE: "minio-prod",
    }).archive;

    // Assess
    expect(archive).toMatchObject({
      kind: "s3",
      region: "cn-north-1",
      endpoint: "http://10.0.0.5:9000",
      service: "minio-prod",
    });
  });

  it("names the service where the refusal says the identity came from", () => {
    // Act
    const sources = [
      {},
      { AWS_ENDPOINT_URL: "http://127.0.0.1:4566" },
      { AWS_ENDPOINT_URL: "http://127.0.0.1:4566", PULPITUM_S3_SERVICE: "emulator" },
    ].map((env) => archiveInUse(parse({ ...EXTERNAL, ...env })));

    // Assess
    expect(sources.map((a) => [a.identity, a.source])).toEqual([
      [
        "arn:aws:s3:::pulpitum-archive/records",
        "PULPITUM_ARCHIVE_URL (on AWS, in the partition of AWS_REGION)",
      ],
      [
        "http://127.0.0.1:4566/pulpitum-archive/records",
        "PULPITUM_ARCHIVE_URL (on the S3 service of AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL)",
      ],
      [
        "emulator:s3://pulpitum-archive/records",
        "PULPITUM_ARCHIVE_URL (on the S3 service PULPITUM_S3_SERVICE names)",
      ],
    ]);
  });

  it("refuses a service name that is not a lowercase DNS-label-like name, naming the accepted form", () => {
    for (const bad of ["MinIO", "-minio", "minio-", "mi nio", "minio:9000", "a".repeat(64), "ü"]) {
      // Act
      const problems = problemsOf({ ...EXTERNAL, PULPITUM_S3_SERVICE: bad });

      // Assess
      expect(problems, bad).toEqual([
        expect.objectContaining({
          variable: "PULPITUM_S3_SERVICE",
          value: bad,
          accepted: expect.stringContaining("lowercase letters, digits, '.' or '-'") as unknown,
        }),
      ]);
    }
  });

  it("refuses PULPITUM_S3_SERVICE beside a file archive, where there is no S3 service to name", () => {
    // Act
    const external = problemsOf({
      DATABASE_URL: EXTERNAL.DATABASE_URL,
      PULPITUM_ARCHIVE_URL: "file:///srv/archive",
      PULPITUM_S3_SERVICE: "minio-prod",
    });
    const embedded = problemsOf({ PULPITUM_S3_SERVICE: "minio-prod" });

    // Assess
    for (const problems of [external, embedded])
      expect(problems).toEqual([
        expect.objectContaining({
          variable: "PULPITUM_S3_SERVICE",
          accepted: "set only with an s3:// PULPITUM_ARCHIVE_URL",
        }),
      ]);
  });

  it("refuses an endpoint that is not an http(s) URL, naming the variable that holds it", () => {
    // Act
    const general = problemsOf({ ...EXTERNAL, AWS_ENDPOINT_URL: "localhost:4566" });
    const specific = problemsOf({
      ...EXTERNAL,
      AWS_ENDPOINT_URL: "http://127.0.0.1:4566",
      AWS_ENDPOINT_URL_S3: "s3.internal",
    });

    // Assess
    expect(general).toEqual([
      expect.objectContaining({ variable: "AWS_ENDPOINT_URL", value: "localhost:4566" }),
    ]);
    expect(specific).toEqual([
      expect.objectContaining({ variable: "AWS_ENDPOINT_URL_S3", value: "s3.internal" }),
    ]);
    expect(general[0]!.accepted).toBe("an http:// or https:// URL, such as http://127.0.0.1:4566");
  });
});
