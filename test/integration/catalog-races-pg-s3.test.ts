/**
 * The query catalog under delays on PostgreSQL and S3 (moto, or any endpoint
 * in AWS_ENDPOINT_URL): the cases of test/support/catalog-races.ts, each on a
 * fresh database and a fresh bucket.
 */
import { inject } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import { catalogRaceSuite, PREFIX } from "../support/catalog-races.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { harnessOn } from "../support/workflow-harness.js";

catalogRaceSuite("PostgreSQL and S3", async () => {
  const endpoint = inject("awsEndpointUrl");
  const db = await freshDatabase(inject("databaseUrl"));
  const store = new SqlHotStore(new PgDatabase(db.url));
  await store.migrate();
  const client = s3Client(endpoint);
  const bucket = await freshBucket(endpoint);
  return {
    h: harnessOn(store, new S3ObjectStore({ bucket, client }), { archivePrefix: PREFIX }),
    close: async () => {
      await store.close();
      client.destroy();
      await db.drop();
    },
  };
});
