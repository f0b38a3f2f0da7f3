/**
 * `pulpitum repair` end to end on the embedded store: a deleted manifest
 * makes `verify` mark the bucket and `query` refuse the table naming it
 * (exit 4); one `repair` brings the table back with every record once; a
 * repair over a missing part is refused naming it (exit 4), changing nothing.
 */
import { existsSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { runCli } from "../../support/cli.js";

const b64 = (text: string) => Buffer.from(text).toString("base64");

interface ListedBucket {
  readonly partition_key_b64: string;
  readonly bucket_key: string;
  readonly manifest_key: string;
  readonly manifest_location: string;
  readonly payload_location: string;
}

describe("pulpitum repair", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-cli-repair-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  const cli = async (args: string[], code: number = EXIT.ok) => {
    const result = await runCli(args, env);
    expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(code);
    return result;
  };
  const rows = async () =>
    (
      await cli(["query", "chat", "SELECT decode(value) AS v FROM chat ORDER BY v", "--json"])
    ).stdout
      .trimEnd()
      .split("\n")
      .map((line) => (JSON.parse(line) as { v: string }).v);

  it("a deleted manifest costs one command: verify and query name it, repair writes it again, and every record reads back once", async () => {
    const values = ["a1", "a2", "b1", "b2", "c1"];
    writeFileSync(
      path.join(home, "records.ndjson"),
      values
        .map((v, i) =>
          JSON.stringify({
            partition_key: b64(`c-${v[0]}`),
            event_time: `2025-0${1 + (i % 2)}-05T10:00:0${i}Z`,
            sort_key: b64(v),
            value: b64(v),
          }),
        )
        .join("\n"),
    );
    await cli(["tables", "create", "chat", "--strategy", "month", "--format", "parquet"]);
    await cli(["import", "chat", path.join(home, "records.ndjson")]);
    await cli(["archive", "--once"]);
    expect(await rows()).toEqual(values);
    const listed = JSON.parse((await cli(["buckets", "chat", "--json"])).stdout) as ListedBucket[];
    const [lost, other] = listed as [ListedBucket, ListedBucket];
    const bucketArgs = (b: ListedBucket) => [
      "chat",
      b.bucket_key,
      "--partition-key-b64",
      b.partition_key_b64,
    ];

    unlinkSync(lost.manifest_location);
    const verify = await cli(["verify"], EXIT.integrity);
    expect(verify.stdout).toContain(`manifest ${lost.manifest_key} is missing`);
    const refused = await cli(["query", "chat", "SELECT count(*) FROM chat"], EXIT.integrity);
    expect(refused.stderr).toContain(`manifest ${lost.manifest_key} is missing`);

    const repaired = await cli(["repair", ...bucketArgs(lost), "--json"]);
    expect(JSON.parse(repaired.stdout)).toMatchObject({
      result: "recreated",
      manifest_key: lost.manifest_key,
      verification: "verified",
    });
    expect(existsSync(lost.manifest_location)).toBe(true);
    expect(await rows()).toEqual(values);
    await cli(["verify"]);

    unlinkSync(other.manifest_location);
    unlinkSync(other.payload_location);
    const partMissing = await cli(["repair", ...bucketArgs(other)], EXIT.integrity);
    expect(partMissing.stderr).toMatch(/payload is missing/);
    expect(partMissing.stderr).toContain(path.basename(other.payload_location));
    expect(partMissing.stdout).toBe("");
    expect(existsSync(other.manifest_location)).toBe(false);
  });
});
