/**
 * Query the archive in place with Athena: a Glue database with one table per
 * payload format over the catalog's Hive-style symlink manifests, and a
 * workgroup whose results land in a bucket of their own.
 *
 * The tables read `{prefix}/catalog/{format}/table_id={table}/`, where each
 * published bucket has one text object listing its payloads' `s3://` URIs
 * (SymlinkTextInputFormat): only what a published manifest names is read, so
 * orphans waiting for GC and payloads superseded by a restore are never
 * counted twice. `table_id` is an injected projected partition: Athena builds
 * the partition's location from the query's `WHERE table_id = '…'`, so no
 * crawler and no MSCK REPAIR ever runs, and a query without that equality is
 * refused rather than scanning every table.
 */
import {
  Duration,
  RemovalPolicy,
  type Stack,
  aws_athena as athena,
  aws_glue as glue,
  aws_s3 as s3,
} from "aws-cdk-lib";
import type { ArchiveStorage } from "./archive-storage.js";
import type { StackSettings } from "./settings.js";

export const SYMLINK_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat";
export const HIVE_TEXT_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat";
export const PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe";
/** The Hive JSON SerDe: one JSON object per line, which is how JSON payloads are written. */
export const JSON_SERDE = "org.apache.hive.hcatalog.data.JsonSerDe";

/** The Glue table over Parquet payloads: the record schema v2 envelope, typed. */
export const PARQUET_TABLE = "records";
/**
 * The Glue table over JSON payloads: the record's JSON form, every field a
 * string (base64 for the bytes, RFC 3339 for the time); decode with
 * `from_base64` and `from_iso8601_timestamp`.
 */
export const JSON_TABLE = "records_json";

export interface QueryCatalog {
  readonly database: glue.CfnDatabase;
  readonly parquetTable: glue.CfnTable;
  readonly jsonTable: glue.CfnTable;
  readonly workGroup: athena.CfnWorkGroup;
  readonly resultsBucket: s3.Bucket;
}

/** `s3://bucket/{prefix}/catalog/{format}/`, the root of one format's symlink folders. */
function catalogRoot(storage: ArchiveStorage, settings: StackSettings, format: string): string {
  return `s3://${storage.archiveBucket.bucketName}/${settings.archivePrefix}/catalog/${format}/`;
}

/** The database is referenced by name (Ref), which orders the table after it. */
function symlinkTable(
  stack: Stack,
  id: string,
  database: glue.CfnDatabase,
  props: {
    name: string;
    description: string;
    root: string;
    serde: string;
    columns: glue.CfnTable.ColumnProperty[];
  },
): glue.CfnTable {
  const table = new glue.CfnTable(stack, id, {
    catalogId: stack.account,
    databaseName: database.ref,
    tableInput: {
      name: props.name,
      description: props.description,
      tableType: "EXTERNAL_TABLE",
      partitionKeys: [{ name: "table_id", type: "string", comment: "the Pulpitum table id" }],
      parameters: {
        EXTERNAL: "TRUE",
        "projection.enabled": "true",
        "projection.table_id.type": "injected",
        "storage.location.template": `${props.root}table_id=\${table_id}/`,
      },
      storageDescriptor: {
        location: props.root,
        inputFormat: SYMLINK_INPUT_FORMAT,
        outputFormat: HIVE_TEXT_OUTPUT_FORMAT,
        serdeInfo: { serializationLibrary: props.serde },
        columns: props.columns,
      },
    },
  });
  return table;
}

export function addQueryCatalog(
  stack: Stack,
  settings: StackSettings,
  storage: ArchiveStorage,
): QueryCatalog {
  const database = new glue.CfnDatabase(stack, "QueryDatabase", {
    catalogId: stack.account,
    databaseInput: {
      name: settings.glueDatabaseName,
      description: `Pulpitum archive of stack ${stack.stackName}: the published payloads, read through the catalog's symlink manifests`,
    },
  });
  const parquetTable = symlinkTable(stack, "QueryParquetTable", database, {
    name: PARQUET_TABLE,
    description: "Records of buckets archived as Parquet (record schema v2 envelope)",
    root: catalogRoot(storage, settings, "parquet"),
    serde: PARQUET_SERDE,
    columns: [
      { name: "partition_key", type: "binary" },
      // Parquet TIMESTAMP(NANOS, UTC); Athena reads it at millisecond precision.
      { name: "event_time", type: "timestamp" },
      { name: "sort_key", type: "binary" },
      { name: "value", type: "binary" },
    ],
  });
  const jsonTable = symlinkTable(stack, "QueryJsonTable", database, {
    name: JSON_TABLE,
    description:
      "Records of buckets archived as JSON: base64 keys and value, RFC 3339 microsecond event_time",
    root: catalogRoot(storage, settings, "json"),
    serde: JSON_SERDE,
    // Strings, decoded in SQL: the JSON SerDe has no base64 binary, and a string time keeps its microseconds.
    columns: ["partition_key", "event_time", "sort_key", "value"].map((name) => ({
      name,
      type: "string",
    })),
  });

  const resultsBucket = new s3.Bucket(stack, "QueryResultsBucket", {
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    encryption: s3.BucketEncryption.S3_MANAGED,
    enforceSSL: true,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    serverAccessLogsBucket: storage.accessLogsBucket,
    serverAccessLogsPrefix: "query-results-bucket/",
    lifecycleRules: [
      {
        id: "expire-query-results",
        expiration: Duration.days(settings.queryResultsRetentionDays),
      },
      {
        id: "abort-incomplete-multipart-uploads",
        abortIncompleteMultipartUploadAfter: Duration.days(1),
      },
    ],
    // Query results are copies of archived records: deleting the stack keeps them until they expire.
    removalPolicy: RemovalPolicy.RETAIN,
  });
  // The retained bucket keeps its TLS-only policy.
  resultsBucket.policy?.applyRemovalPolicy(RemovalPolicy.RETAIN);

  const workGroup = new athena.CfnWorkGroup(stack, "QueryWorkGroup", {
    name: `${stack.stackName}-pulpitum`,
    description: `Queries over the Pulpitum archive (database ${settings.glueDatabaseName})`,
    state: "ENABLED",
    // Deleting the stack deletes the workgroup with its saved queries and history.
    recursiveDeleteOption: true,
    workGroupConfiguration: {
      enforceWorkGroupConfiguration: true,
      publishCloudWatchMetricsEnabled: true,
      bytesScannedCutoffPerQuery: settings.queryBytesScannedCutoffGb * 1024 ** 3,
      resultConfiguration: {
        outputLocation: `s3://${resultsBucket.bucketName}/results/`,
        encryptionConfiguration: { encryptionOption: "SSE_S3" },
        expectedBucketOwner: stack.account,
      },
    },
  });
  return { database, parquetTable, jsonTable, workGroup, resultsBucket };
}
