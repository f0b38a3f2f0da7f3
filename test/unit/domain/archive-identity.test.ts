/**
 * An S3 archive's identity names its service (domain/archive-identity.ts):
 * a same-named bucket on another service is another archive, while every
 * URL of one service names the same one.
 */
import { describe, expect, it } from "vitest";
import {
  fileArchiveIdentity,
  legacyS3ArchiveIdentity,
  s3ArchiveIdentity,
  type S3ServiceSettings,
} from "../../../src/domain/archive-identity.js";

const BUCKET = "archive-a";
const PREFIX = "team/pulpitum";
const identity = (settings: S3ServiceSettings, prefix = PREFIX) =>
  s3ArchiveIdentity(BUCKET, prefix, settings);

describe("an S3 archive's identity", () => {
  it("differs for a same-named bucket and prefix on another service: AWS, MinIO, R2, an emulator", () => {
    // Act
    const identities = [
      identity({}),
      identity({ endpoint: "https://minio.example.net:9000" }),
      identity({ endpoint: "https://0123456789abcdef.r2.cloudflarestorage.com" }),
      identity({ endpoint: "http://127.0.0.1:4566" }),
      identity({ endpoint: "http://127.0.0.1:4567" }),
      identity({ endpoint: "http://127.0.0.1:4566/proxied" }),
      identity({ service: "minio-prod" }),
      identity({ region: "cn-north-1" }),
      identity({ region: "us-gov-west-1" }),
    ];

    // Assess
    expect(new Set(identities).size).toBe(identities.length);
    expect(identities[0]).toBe("arn:aws:s3:::archive-a/team/pulpitum");
    expect(identities[1]).toBe("https://minio.example.net:9000/archive-a/team/pulpitum");
    expect(identities[6]).toBe("minio-prod:s3://archive-a/team/pulpitum");
    expect(identities[7]).toBe("arn:aws-cn:s3:::archive-a/team/pulpitum");
  });

  it("is one for every endpoint of AWS's own in a partition: none, global, regional, dual-stack, FIPS, VPC interface endpoints", () => {
    // Prepare
    const commercial: S3ServiceSettings[] = [
      {},
      { region: "eu-west-1" },
      { region: "us-east-1" },
      { endpoint: "https://s3.amazonaws.com" },
      { endpoint: "https://s3.eu-west-1.amazonaws.com/" },
      { endpoint: "https://S3.EU-WEST-1.AMAZONAWS.COM:443" },
      { endpoint: "https://s3-eu-west-1.amazonaws.com" },
      { endpoint: "https://s3.dualstack.eu-west-1.amazonaws.com" },
      { endpoint: "https://s3-fips.us-east-1.amazonaws.com" },
      { endpoint: "https://bucket.vpce-0a1b2c3d4e5f-abcd1234.s3.eu-west-1.vpce.amazonaws.com" },
      // The endpoint wins over the region: it is where the client sends its requests.
      { endpoint: "https://s3.us-east-1.amazonaws.com", region: "cn-north-1" },
      { service: "aws" },
    ];
    const china: S3ServiceSettings[] = [
      { region: "cn-north-1" },
      { region: "cn-northwest-1" },
      { endpoint: "https://s3.cn-north-1.amazonaws.com.cn" },
      { endpoint: "https://bucket.vpce-0a1b2c3d.s3.cn-northwest-1.vpce.amazonaws.com.cn" },
      { service: "aws-cn" },
    ];
    const govCloud: S3ServiceSettings[] = [
      { region: "us-gov-west-1" },
      { endpoint: "https://s3.us-gov-west-1.amazonaws.com" },
      { endpoint: "https://s3-fips.us-gov-east-1.amazonaws.com" },
      { endpoint: "https://s3-us-gov-west-1.amazonaws.com" },
      { service: "aws-us-gov" },
    ];

    // Act
    const names = (list: S3ServiceSettings[]) => new Set(list.map((s) => identity(s)));

    // Assess
    expect([...names(commercial)]).toEqual(["arn:aws:s3:::archive-a/team/pulpitum"]);
    expect([...names(china)]).toEqual(["arn:aws-cn:s3:::archive-a/team/pulpitum"]);
    expect([...names(govCloud)]).toEqual(["arn:aws-us-gov:s3:::archive-a/team/pulpitum"]);
  });

  it("spells one endpoint one way: case, default port, trailing slash, credentials and query do not count", () => {
    // Act
    const spellings = new Set(
      [
        "http://minio.internal",
        "http://MINIO.internal:80/",
        "http://user:secret@minio.internal/?x=1",
        "  http://minio.internal//  ",
      ].map((endpoint) => identity({ endpoint })),
    );

    // Assess
    expect([...spellings]).toEqual(["http://minio.internal/archive-a/team/pulpitum"]);
    expect(identity({ endpoint: "https://minio.internal" })).not.toBe(
      identity({ endpoint: "http://minio.internal:8443" }),
    );
  });

  it("a named service replaces the endpoint: one service behind a proxy and under two host names is one archive", () => {
    // Act
    const named = new Set(
      ["http://127.0.0.1:4566", "http://localhost:4566", "http://127.0.0.1:39121", undefined].map(
        (endpoint) => identity({ endpoint, service: "soak-emulator", region: "eu-west-1" }),
      ),
    );

    // Assess
    expect([...named]).toEqual(["soak-emulator:s3://archive-a/team/pulpitum"]);
  });

  it("can never equal the service-less form a database bound before the service was named holds, whatever the prefix", () => {
    // Prepare: prefixes that spell, after a bucket, what a new form would append.
    const prefixes = [
      "",
      "p",
      "p@aws",
      "p?service=aws",
      "arn:aws:s3:::x",
      "s3://x",
      "a b/ü/\u0001",
    ];
    const settings: S3ServiceSettings[] = [
      {},
      { endpoint: "http://127.0.0.1:4566" },
      { service: "s3" },
      { service: "arn" },
      { service: "http" },
    ];

    // Act
    const current = prefixes.flatMap((prefix) => settings.map((s) => identity(s, prefix)));
    const legacy = prefixes.map((prefix) => legacyS3ArchiveIdentity(BUCKET, prefix));

    // Assess
    expect(current.filter((name) => legacy.includes(name))).toEqual([]);
    expect(current.some((name) => name.startsWith("s3://"))).toBe(false);
    expect(new Set(current).size).toBe(current.length);
    expect(legacyS3ArchiveIdentity(BUCKET, "/team/pulpitum/")).toBe("s3://archive-a/team/pulpitum");
  });

  it("names an archive at the bucket's root without a trailing slash in every form", () => {
    // Act
    const roots = [
      identity({}, ""),
      identity({ endpoint: "http://127.0.0.1:4566/" }, "/"),
      identity({ service: "minio-prod" }, ""),
      legacyS3ArchiveIdentity(BUCKET, ""),
      fileArchiveIdentity("/srv/archive/"),
    ];

    // Assess
    expect(roots).toEqual([
      "arn:aws:s3:::archive-a",
      "http://127.0.0.1:4566/archive-a",
      "minio-prod:s3://archive-a",
      "s3://archive-a",
      "file:///srv/archive",
    ]);
  });
});
