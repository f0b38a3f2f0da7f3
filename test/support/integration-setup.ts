/**
 * Global setup of the integration suite: uses DATABASE_URL and
 * AWS_ENDPOINT_URL when set (CI, LocalStack, real AWS), else starts a
 * throwaway PostgreSQL and moto server for the run.
 */
import type {} from "vitest";
import type { TestProject } from "vitest/node";
import { startMoto, startPostgres, type RunningService } from "./services.js";

const started: RunningService[] = [];

export async function setup(project: TestProject): Promise<void> {
  let databaseUrl = process.env.DATABASE_URL;
  let endpoint = process.env.AWS_ENDPOINT_URL;
  if (!databaseUrl) {
    const pg = await startPostgres();
    started.push(pg);
    databaseUrl = pg.url;
  }
  if (!endpoint) {
    const moto = await startMoto();
    started.push(moto);
    endpoint = moto.url;
  }
  project.provide("databaseUrl", databaseUrl);
  project.provide("awsEndpointUrl", endpoint);
}

export async function teardown(): Promise<void> {
  for (const service of started.reverse()) await service.stop();
}

declare module "vitest" {
  export interface ProvidedContext {
    databaseUrl: string;
    awsEndpointUrl: string;
  }
}
