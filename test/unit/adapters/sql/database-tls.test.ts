import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  isLocalHost,
  resolveDatabaseTls,
  type DatabaseTlsOptions,
  type ResolvedDatabaseTls,
} from "../../../../src/adapters/sql/database-tls.js";
import { parseConfig } from "../../../../src/config/config.js";
import { ConfigError } from "../../../../src/errors.js";
import { pgConnection } from "../../../../src/open-adapters.js";

const AUTO: DatabaseTlsOptions = { setting: "auto", caFile: undefined };
const ARCHIVE = { PULPITUM_ARCHIVE_URL: "s3://pulpitum-archive/records" };

function resolved(url: string, options: DatabaseTlsOptions = AUTO): ResolvedDatabaseTls {
  const r = resolveDatabaseTls(url, options);
  if (typeof r === "string") throw new Error(`refused: ${r}`);
  return r;
}

/** What `openAdapters` hands `pg`, from the environment as the CLI and the functions read it. */
function connectionFor(env: Record<string, string>) {
  const config = parseConfig({ ...ARCHIVE, ...env }, { cwd: "/srv/app" });
  if (config.database.kind !== "postgres") throw new Error("expected postgres");
  return pgConnection(config.database);
}

const dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-tls-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the TLS of a database connection", () => {
  it("verifies the certificate and host name of a database reached over the network when the URL says nothing", () => {
    const { url, ssl } = connectionFor({
      DATABASE_URL: "postgresql://archiver@db.internal:5432/app",
    });
    expect(ssl).toEqual({ rejectUnauthorized: true });
    expect(url).toBe("postgresql://archiver@db.internal:5432/app");
    expect(resolved("postgresql://a@10.0.3.7/app").mode).toBe("verify-full");
    expect(resolved("postgresql://a@[2001:db8::5]/app").mode).toBe("verify-full");
  });

  it("keeps loopback, localhost and Unix sockets in plaintext", () => {
    for (const url of [
      "postgresql://postgres@127.0.0.1:5432/postgres",
      "postgresql://postgres@127.8.0.2/postgres",
      "postgresql://postgres@localhost/postgres",
      "postgresql://postgres@[::1]:5432/postgres",
      "postgresql://postgres@ignored/postgres?host=/var/run/postgresql",
    ]) {
      expect({ url, mode: resolved(url).mode }).toEqual({ url, mode: "disable" });
    }
    expect(
      connectionFor({ DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/postgres" }).ssl,
    ).toBe(false);
    expect(isLocalHost("127.example.com")).toBe(false);
    expect(isLocalHost("128.0.0.1")).toBe(false);
  });

  it("lets sslmode=disable and PULPITUM_DB_TLS=off opt out, and PULPITUM_DB_TLS=verify-full opt loopback in", () => {
    expect(
      connectionFor({ DATABASE_URL: "postgresql://a@db.internal/app?sslmode=disable" }),
    ).toEqual({ url: "postgresql://a@db.internal/app", ssl: false });
    expect(
      connectionFor({ DATABASE_URL: "postgresql://a@db.internal/app", PULPITUM_DB_TLS: "off" }).ssl,
    ).toBe(false);
    expect(
      connectionFor({
        DATABASE_URL: "postgresql://a@127.0.0.1/app",
        PULPITUM_DB_TLS: "verify-full",
      }).ssl,
    ).toEqual({ rejectUnauthorized: true });
    // The URL is the more specific setting.
    expect(
      connectionFor({
        DATABASE_URL: "postgresql://a@db.internal/app?sslmode=verify-full",
        PULPITUM_DB_TLS: "off",
      }).ssl,
    ).toEqual({ rejectUnauthorized: true });
  });

  it("reads sslmode=require, prefer and verify-ca as verify-full, never weaker, and only no-verify skips the check", () => {
    for (const mode of ["require", "prefer", "verify-ca", "verify-full"]) {
      const r = resolved(`postgresql://a@db.internal/app?sslmode=${mode}&application_name=x`);
      expect({ mode, resolved: r.mode }).toEqual({ mode, resolved: "verify-full" });
      // Taken out of the URL: pg's own reading of it would override the ssl option.
      expect(r.connectionString).toBe("postgresql://a@db.internal/app?application_name=x");
    }
    expect(
      connectionFor({ DATABASE_URL: "postgresql://a@db.internal/app?sslmode=no-verify" }).ssl,
    ).toEqual({ rejectUnauthorized: false });
  });

  it("trusts the CA of PULPITUM_DB_CA_FILE, or of sslrootcert in the URL, which wins", () => {
    const ca = path.join(dir, "ca.pem");
    const other = path.join(dir, "root.crt");
    writeFileSync(ca, "-----BEGIN CERTIFICATE-----\nCA FILE\n-----END CERTIFICATE-----\n");
    writeFileSync(other, "-----BEGIN CERTIFICATE-----\nROOT CRT\n-----END CERTIFICATE-----\n");
    expect(
      connectionFor({ DATABASE_URL: "postgresql://a@db.internal/app", PULPITUM_DB_CA_FILE: ca })
        .ssl,
    ).toEqual({ rejectUnauthorized: true, ca: expect.stringContaining("CA FILE") });
    const fromUrl = connectionFor({
      DATABASE_URL: `postgresql://a@db.internal/app?sslrootcert=${encodeURIComponent(other)}`,
      PULPITUM_DB_CA_FILE: ca,
    });
    expect(fromUrl).toEqual({
      url: "postgresql://a@db.internal/app",
      ssl: { rejectUnauthorized: true, ca: expect.stringContaining("ROOT CRT") },
    });
  });

  it("refuses an unknown sslmode or PULPITUM_DB_TLS, and an unreadable CA file, naming the variable", () => {
    expect(() =>
      parseConfig(
        { ...ARCHIVE, DATABASE_URL: "postgresql://a@db.internal/app?sslmode=allow-any" },
        { cwd: "/" },
      ),
    ).toThrow(/DATABASE_URL=.*sslmode=disable/);
    expect(() =>
      parseConfig(
        { ...ARCHIVE, DATABASE_URL: "postgresql://a@db.internal/app", PULPITUM_DB_TLS: "yes" },
        { cwd: "/" },
      ),
    ).toThrow(/PULPITUM_DB_TLS="yes" is invalid: auto, verify-full, off/);
    let error: unknown;
    try {
      connectionFor({
        DATABASE_URL: "postgresql://a@db.internal/app",
        PULPITUM_DB_CA_FILE: path.join(dir, "missing.pem"),
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toMatch(/PULPITUM_DB_CA_FILE=.*missing\.pem.*ENOENT/);
  });
});
