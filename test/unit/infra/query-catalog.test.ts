/**
 * Querying the archive in place: the Glue tables over the catalog's symlink
 * manifests, the Athena workgroup and its results bucket, and the lifecycle
 * rule that moves large payloads to a cheaper storage class.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import cdkNag from "cdk-nag";
import { afterAll, describe, expect, it } from "vitest";
import { stackPropsFrom } from "../../../infra/app-props.js";
import {
  ArchiverStack,
  MIN_TRANSITION_BYTES,
  type ArchiverStackProps,
} from "../../../infra/archiver-stack.js";
import { synthesizedOnce } from "../../support/synthesized-once.js";

const OUT_ROOT = mkdtempSync(path.join(os.tmpdir(), "pulpitum-infra-query-"));
afterAll(() => rmSync(OUT_ROOT, { recursive: true, force: true }));

const synthesize = synthesizedOnce((props: ArchiverStackProps = {}) => {
  const app = new App({
    outdir: mkdtempSync(path.join(OUT_ROOT, "cdk.out-")),
    context: { "aws:cdk:bundling-stacks": [], "pulpitum:databasePublic": "acknowledged" },
  });
  const stack = new ArchiverStack(app, "Pulpitum", props);
  return { stack, template: Template.fromStack(stack) };
});

const logicalId = (stack: ArchiverStack, construct: { node: { defaultChild?: unknown } }) =>
  stack.getLogicalId(construct.node.defaultChild as never);

/** `s3://<archive bucket>/{prefix}/catalog/{format}/` as CloudFormation writes it. */
function catalogLocation(stack: ArchiverStack, prefix: string, format: string) {
  return {
    "Fn::Join": [
      "",
      ["s3://", { Ref: logicalId(stack, stack.archiveBucket) }, `/${prefix}/catalog/${format}/`],
    ],
  };
}

function tableNamed(template: Template, name: string) {
  const tables = Object.values(
    template.findResources("AWS::Glue::Table", {
      Properties: { TableInput: { Name: name } },
    }),
  );
  expect(tables).toHaveLength(1);
  return tables[0]!.Properties as {
    DatabaseName: unknown;
    TableInput: {
      TableType: string;
      PartitionKeys: Array<{ Name: string; Type: string }>;
      Parameters: Record<string, unknown>;
      StorageDescriptor: {
        Location: unknown;
        InputFormat: string;
        OutputFormat: string;
        SerdeInfo: { SerializationLibrary: string };
        Columns: Array<{ Name: string; Type: string }>;
      };
    };
  };
}

const columns = (t: ReturnType<typeof tableNamed>) =>
  t.TableInput.StorageDescriptor.Columns.map((c) => `${c.Name} ${c.Type}`);

describe("the Glue tables over the catalog", () => {
  it("reads Parquet payloads through the catalog's symlink manifests with the envelope's columns, typed", () => {
    const { stack, template } = synthesize();
    template.hasResourceProperties("AWS::Glue::Database", {
      DatabaseInput: { Name: "pulpitum_archive" },
    });
    const t = tableNamed(template, "records");
    expect(t.DatabaseName).toEqual({ Ref: stack.getLogicalId(stack.queryCatalog!.database) });
    expect(t.TableInput.TableType).toBe("EXTERNAL_TABLE");
    expect(t.TableInput.StorageDescriptor).toMatchObject({
      InputFormat: "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat",
      OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
      SerdeInfo: {
        SerializationLibrary: "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
      },
    });
    expect(columns(t)).toEqual([
      "partition_key binary",
      "event_time timestamp",
      "sort_key binary",
      "value binary",
    ]);
    expect(t.TableInput.StorageDescriptor.Location).toEqual(
      catalogLocation(stack, "pulpitum", "parquet"),
    );
  });

  it("resolves each table's partition from the query's table_id by projection, with no crawler and no MSCK", () => {
    const { stack, template } = synthesize({ archivePrefix: "archive/prod" });
    for (const [name, format] of [
      ["records", "parquet"],
      ["records_json", "json"],
    ] as const) {
      const t = tableNamed(template, name);
      expect(t.TableInput.PartitionKeys).toEqual([
        { Name: "table_id", Type: "string", Comment: "the Pulpitum table id" },
      ]);
      expect(t.TableInput.Parameters).toMatchObject({
        "projection.enabled": "true",
        "projection.table_id.type": "injected",
      });
      expect(t.TableInput.Parameters["storage.location.template"]).toEqual({
        "Fn::Join": [
          "",
          [
            "s3://",
            { Ref: logicalId(stack, stack.archiveBucket) },
            `/archive/prod/catalog/${format}/table_id=\${table_id}/`,
          ],
        ],
      });
    }
    template.resourceCountIs("AWS::Glue::Crawler", 0);
    template.resourceCountIs("AWS::Glue::Partition", 0);
  });

  it("reads JSON payloads through their own symlink folder as strings for from_base64 and from_iso8601_timestamp", () => {
    const { stack, template } = synthesize();
    const t = tableNamed(template, "records_json");
    expect(t.TableInput.StorageDescriptor).toMatchObject({
      InputFormat: "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat",
      SerdeInfo: { SerializationLibrary: "org.apache.hive.hcatalog.data.JsonSerDe" },
    });
    expect(columns(t)).toEqual([
      "partition_key string",
      "event_time string",
      "sort_key string",
      "value string",
    ]);
    expect(t.TableInput.StorageDescriptor.Location).toEqual(
      catalogLocation(stack, "pulpitum", "json"),
    );
  });

  it("names the database as configured and refuses a name Athena would need quoted", () => {
    const { template } = synthesize({ glueDatabaseName: "archive_prod" });
    template.hasResourceProperties("AWS::Glue::Database", {
      DatabaseInput: { Name: "archive_prod" },
    });
    expect(() => synthesize({ glueDatabaseName: "Archive-Prod" })).toThrow(
      /glueDatabaseName="Archive-Prod" is invalid: 1-255 lower-case letters, digits or '_'/,
    );
  });
});

describe("the Athena workgroup", () => {
  it("enforces encrypted results in its own bucket and cancels a query past the scan cutoff", () => {
    const { stack, template } = synthesize({ queryBytesScannedCutoffGb: 5 });
    const results = logicalId(stack, stack.queryCatalog!.resultsBucket);
    template.hasResourceProperties("AWS::Athena::WorkGroup", {
      Name: "Pulpitum-pulpitum",
      RecursiveDeleteOption: true,
      WorkGroupConfiguration: {
        EnforceWorkGroupConfiguration: true,
        PublishCloudWatchMetricsEnabled: true,
        BytesScannedCutoffPerQuery: 5 * 1024 ** 3,
        ResultConfiguration: {
          OutputLocation: { "Fn::Join": ["", ["s3://", { Ref: results }, "/results/"]] },
          EncryptionConfiguration: { EncryptionOption: "SSE_S3" },
        },
      },
    });
    expect(() => synthesize({ queryBytesScannedCutoffGb: 0 })).toThrow(
      /queryBytesScannedCutoffGb=0 is invalid: an integer from 1 to 10240/,
    );
  });

  it("keeps results in a bucket as locked down as the archive's: encrypted, private, TLS only, logged, expiring", () => {
    const { stack, template } = synthesize({ queryResultsRetentionDays: 3 });
    const resources = template.toJSON().Resources as Record<
      string,
      { Properties: Record<string, { Rules?: unknown[] } & Record<string, unknown>> }
    >;
    const archive = resources[logicalId(stack, stack.archiveBucket)]!.Properties;
    const results = resources[logicalId(stack, stack.queryCatalog!.resultsBucket)]!.Properties;
    for (const key of ["BucketEncryption", "PublicAccessBlockConfiguration", "OwnershipControls"]) {
      expect(results[key]).toEqual(archive[key]);
    }
    expect(results.LoggingConfiguration).toEqual({
      DestinationBucketName: { Ref: logicalId(stack, stack.accessLogsBucket) },
      LogFilePrefix: "query-results-bucket/",
    });
    expect(results.LifecycleConfiguration?.Rules).toContainEqual({
      Id: "expire-query-results",
      ExpirationInDays: 3,
      Status: "Enabled",
    });
    template.hasResourceProperties("AWS::S3::BucketPolicy", {
      Bucket: { Ref: logicalId(stack, stack.queryCatalog!.resultsBucket) },
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: "Deny",
            Action: "s3:*",
            Condition: { Bool: { "aws:SecureTransport": "false" } },
          }),
        ]),
      },
    });
  });

  it("passes cdk-nag's AwsSolutions and ServerlessChecks packs with the query resources in place", () => {
    const { stack } = synthesize({ payloadTransitionDays: 30 });
    expect(new cdkNag.AwsSolutionsChecks(stack).validateScope(stack).violations).toEqual([]);
    expect(new cdkNag.ServerlessChecks(stack).validateScope(stack).violations).toEqual([]);
  });

  it("adds none of it when queryCatalog is false", () => {
    const { stack, template } = synthesize({ queryCatalog: false });
    expect(stack.queryCatalog).toBeUndefined();
    for (const type of ["AWS::Glue::Database", "AWS::Glue::Table", "AWS::Athena::WorkGroup"]) {
      template.resourceCountIs(type, 0);
    }
    template.resourceCountIs("AWS::S3::Bucket", 2);
  });

  it("reads the query settings from context keys and refuses a flag that is not true or false", () => {
    const context: Record<string, string> = {
      "pulpitum:queryCatalog": "false",
      "pulpitum:glueDatabaseName": "archive_prod",
      "pulpitum:queryBytesScannedCutoffGb": "7",
      "pulpitum:queryResultsRetentionDays": "2",
      "pulpitum:payloadTransitionDays": "60",
      "pulpitum:payloadStorageClass": "GLACIER_IR",
    };
    const { props } = stackPropsFrom((key) => context[key], {});
    expect(props).toMatchObject({
      queryCatalog: false,
      glueDatabaseName: "archive_prod",
      queryBytesScannedCutoffGb: 7,
      queryResultsRetentionDays: 2,
      payloadTransitionDays: 60,
      payloadStorageClass: "GLACIER_IR",
    });
    expect(() => stackPropsFrom((key) => ({ "pulpitum:queryCatalog": "yes" })[key], {})).toThrow(
      /pulpitum:queryCatalog \/ PULPITUM_QUERY_CATALOG="yes" is invalid: true or false/,
    );
  });
});

describe("the payload storage lifecycle", () => {
  const transitionRules = (template: Template, stack: ArchiverStack) =>
    (
      template.toJSON().Resources[logicalId(stack, stack.archiveBucket)].Properties
        .LifecycleConfiguration.Rules as Array<Record<string, unknown>>
    ).filter((r) => r.Id === "transition-payloads");

  it("moves only objects above 128 KiB under {prefix}/v4/ to the chosen class after the chosen days", () => {
    const { stack, template } = synthesize({
      archivePrefix: "arch",
      payloadTransitionDays: 90,
      payloadStorageClass: "GLACIER_IR",
    });
    expect(MIN_TRANSITION_BYTES).toBe(131_072);
    expect(transitionRules(template, stack)).toEqual([
      {
        Id: "transition-payloads",
        Prefix: "arch/v4/",
        ObjectSizeGreaterThan: "131072",
        Status: "Enabled",
        Transitions: [{ StorageClass: "GLACIER_IR", TransitionInDays: 90 }],
      },
    ]);
    const ia = synthesize({ payloadTransitionDays: 30 });
    expect(transitionRules(ia.template, ia.stack)[0]!.Transitions).toEqual([
      { StorageClass: "STANDARD_IA", TransitionInDays: 30 },
    ]);
  });

  it("transitions nothing by default", () => {
    const { stack, template } = synthesize();
    expect(transitionRules(template, stack)).toEqual([]);
  });

  it("refuses a transition S3 would reject or a class without days, naming the setting", () => {
    expect(() => synthesize({ payloadTransitionDays: 10 })).toThrow(
      /payloadTransitionDays=10 is invalid: an integer from 30 to 36500/,
    );
    expect(() =>
      synthesize({ payloadTransitionDays: 10, payloadStorageClass: "DEEP_ARCHIVE" as never }),
    ).toThrow(/payloadStorageClass="DEEP_ARCHIVE" is invalid: one of STANDARD_IA, GLACIER_IR/);
    expect(() => synthesize({ payloadStorageClass: "GLACIER_IR" })).toThrow(
      /payloadStorageClass="GLACIER_IR" needs payloadTransitionDays/,
    );
  });
});
