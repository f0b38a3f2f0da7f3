/**
 * Where the soak runs: a fresh database and a fresh S3 bucket, in the
 * services named by DATABASE_URL / AWS_ENDPOINT_URL or in a throwaway
 * PostgreSQL and moto started for the run. Everything started here is
 * stopped by `teardown`, which is safe to call more than once.
 */
import { randomBytes } from "node:crypto";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  S3Client,
} from "@aws-sdk/client-s3";
import pg from "pg";
import {
  startMoto,
  startPostgres,
  type RunningPostgres,
  type RunningService,
} from "../test/support/services.js";

export interface SoakEnvironment {
  readonly databaseUrl: string;
  readonly endpoint: string;
  readonly s3Bucket: string;
  readonly archiveUrl: string;
  /** The environment every archiver process and the soak's own runtime get. */
  readonly baseEnv: NodeJS.ProcessEnv;
  /** Admin connections to the soak's database (monitoring, sabotage, end-check queries). */
  readonly admin: pg.Pool;
  readonly s3: S3Client;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
  readonly region: string;
  /** The PostgreSQL cluster the soak started, which it may restart; undefined with DATABASE_URL. */
  readonly postgres: RunningPostgres | undefined;
  teardown(keepData: boolean): Promise<void>;
}

const REGION = "us-east-1";

export async function prepareEnvironment(
  log: (line: string) => void,
  started: RunningService[],
): Promise<SoakEnvironment> {
  let serverUrl = process.env.DATABASE_URL?.trim() || undefined;
  let endpoint = process.env.AWS_ENDPOINT_URL?.trim() || undefined;
  const externalDatabase = serverUrl !== undefined;
  const externalS3 = endpoint !== undefined;
  let postgres: RunningPostgres | undefined;
  if (serverUrl === undefined) {
    const service = await startPostgres();
    started.push(service);
    postgres = service;
    serverUrl = service.url;
    log(`started a throwaway PostgreSQL at ${serverUrl}`);
  }
  if (endpoint === undefined) {
    const service = await startMoto();
    started.push(service);
    endpoint = service.url;
    log(`started moto at ${endpoint}`);
  }

  const suffix = randomBytes(4).toString("hex");
  const database = `pulpitum_soak_${suffix}`;
  const server = new pg.Client({ connectionString: serverUrl });
  await server.connect();
  try {
    await server.query(`CREATE DATABASE ${database}`);
  } finally {
    await server.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  const databaseUrl = url.toString();

  const credentials = {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? "test",
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? "test",
  };
  const region = process.env.AWS_REGION ?? REGION;
  const s3 = new S3Client({ endpoint, region, credentials, forcePathStyle: true });
  const s3Bucket = `pulpitum-soak-${suffix}`;
  await s3.send(new CreateBucketCommand({ Bucket: s3Bucket }));
  const archiveUrl = `s3://${s3Bucket}/soak`;
  log(`database ${database}, archive ${archiveUrl}`);

  const baseEnv: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    // The soak decides every archiver and Pulpitum setting itself.
    if (k.startsWith("ARCHIVER_") || k.startsWith("PULPITUM_")) continue;
    baseEnv[k] = v;
  }
  Object.assign(baseEnv, {
    DATABASE_URL: databaseUrl,
    PULPITUM_ARCHIVE_URL: archiveUrl,
    AWS_ENDPOINT_URL: endpoint,
    AWS_REGION: region,
    AWS_ACCESS_KEY_ID: credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    PULPITUM_S3_FORCE_PATH_STYLE: "true",
    // One emulator, reached directly and through the fault and catalog-delay proxies at other
    // URLs: named once, so every process's archive identity names the same service.
    PULPITUM_S3_SERVICE: "soak-emulator",
    PULPITUM_LOG: "debug",
  });

  const admin = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  admin.on("error", () => {});
  let tornDown = false;
  return {
    databaseUrl,
    endpoint,
    s3Bucket,
    archiveUrl,
    baseEnv,
    admin,
    s3,
    credentials,
    region,
    postgres,
    async teardown(keepData: boolean) {
      if (tornDown) return;
      tornDown = true;
      await admin.end().catch(() => undefined);
      // Data in services we started dies with them; in external ones it is removed unless kept.
      if (externalS3 && !keepData) await emptyAndDeleteBucket(s3, s3Bucket).catch(() => undefined);
      s3.destroy();
      if (externalDatabase && !keepData) {
        const c = new pg.Client({ connectionString: serverUrl });
        await c
          .connect()
          .then(() => c.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`))
          .catch(() => undefined)
          .finally(() => c.end().catch(() => undefined));
      }
    },
  };
}

async function emptyAndDeleteBucket(s3: S3Client, bucket: string): Promise<void> {
  let token: string | undefined;
  do {
    const page = await s3.send(
      new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }),
    );
    const keys = (page.Contents ?? []).flatMap((o) => (o.Key ? [{ Key: o.Key }] : []));
    if (keys.length > 0)
      await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
  await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
}
