/** Fresh databases and buckets on the integration suite's PostgreSQL and S3 endpoint. */
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { randomBytes } from "node:crypto";
import pg from "pg";

/** A new empty database on the server of `serverUrl`; its URL and a function that drops it. */
export async function freshDatabase(
  serverUrl: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `pulpitum_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export function s3Client(endpoint: string): S3Client {
  return new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
}

/** A new bucket on the endpoint. */
export async function freshBucket(endpoint: string): Promise<string> {
  const bucket = `pulpitum-${randomBytes(6).toString("hex")}`;
  const client = s3Client(endpoint);
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } finally {
    client.destroy();
  }
  return bucket;
}
