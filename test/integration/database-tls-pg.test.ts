/**
 * The runtime's database connection on a real PostgreSQL (the suite's
 * throwaway server on loopback, which has no certificate): loopback stays
 * plaintext, and asking for TLS really asks the server for it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parseConfig } from "../../src/config/config.js";
import { openAdapters } from "../../src/open-adapters.js";
import { freshDatabase } from "../support/integration-resources.js";

let url: string;
let drop: () => Promise<void>;
const archiveRoot = mkdtempSync(path.join(os.tmpdir(), "pulpitum-tls-archive-"));
beforeAll(async () => {
  ({ url, drop } = await freshDatabase(inject("databaseUrl")));
});
afterAll(async () => {
  await drop();
  rmSync(archiveRoot, { recursive: true, force: true });
});

function open(env: Record<string, string>) {
  const config = parseConfig(
    { DATABASE_URL: url, PULPITUM_ARCHIVE_URL: `file://${archiveRoot}`, ...env },
    { cwd: process.cwd() },
  );
  return openAdapters(config, { migrate: true });
}

describe("the database connection's TLS on PostgreSQL", () => {
  it("connects to a loopback server in plaintext, as before, with nothing set", async () => {
    expect(new URL(url).hostname).toMatch(/^(127\.|localhost$|\[::1\]$)/);
    const runtime = await open({});
    try {
      expect(await runtime.hotStore.listTables()).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("asks the server for TLS under PULPITUM_DB_TLS=verify-full, and a server without it is refused, not used in plaintext", async () => {
    await expect(open({ PULPITUM_DB_TLS: "verify-full" })).rejects.toThrow(/does not support SSL/);
  });
});
