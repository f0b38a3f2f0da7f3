/**
 * How a connection to PostgreSQL or CockroachDB is protected in transit.
 *
 * A database reached over a network gets TLS with the server's certificate
 * and host name verified (libpq's `sslmode=verify-full`) unless someone said
 * otherwise in so many words: a connection that silently falls back to
 * plaintext, or accepts any certificate, hands the credentials and every
 * archived record to whoever sits on the path. Loopback and Unix sockets
 * never leave the machine, so they stay plaintext by default (the local
 * PostgreSQL of the tests and the demo has no certificate).
 *
 * Precedence: an `sslmode` (or `ssl`) in the URL, then PULPITUM_DB_TLS, then
 * the host. pg's own reading of these URL parameters would override any
 * `ssl` option given beside them, so they are taken out of the URL here and
 * the `ssl` option built from them alone.
 */
import { isIP } from "node:net";
import type { ConnectionOptions } from "node:tls";

/** PULPITUM_DB_TLS: `auto` decides by the host. */
export const DATABASE_TLS_SETTINGS = ["auto", "verify-full", "off"] as const;
export type DatabaseTlsSetting = (typeof DATABASE_TLS_SETTINGS)[number];

/** `verify-full`: TLS, chain and host name checked; `no-verify`: TLS, any certificate; `disable`: plaintext. */
export type DatabaseTlsMode = "verify-full" | "no-verify" | "disable";

export interface DatabaseTlsOptions {
  readonly setting: DatabaseTlsSetting;
  /** PEM CA bundle (PULPITUM_DB_CA_FILE); undefined: Node's CA store and NODE_EXTRA_CA_CERTS. */
  readonly caFile: string | undefined;
}

export interface ResolvedDatabaseTls {
  /** The URL without the TLS parameters this module interprets. */
  readonly connectionString: string;
  readonly mode: DatabaseTlsMode;
  /** What decided the mode, for `status` and error messages. */
  readonly decidedBy: "url" | "PULPITUM_DB_TLS" | "loopback" | "network";
  readonly caFile: string | undefined;
  readonly certFile: string | undefined;
  readonly keyFile: string | undefined;
}

/** URL parameters pg would read itself; each is interpreted here instead. */
const TLS_PARAMETERS = ["sslmode", "ssl", "sslrootcert", "sslcert", "sslkey"] as const;

export const SSLMODE_FORM =
  "sslmode=disable (plaintext), no-verify (TLS, certificate not checked), or verify-full (also require, verify-ca, prefer: TLS with the certificate and host name checked)";

/** The mode the URL's `sslmode` (or legacy `ssl`) asks for, or the accepted form when it is invalid. */
function modeInUrl(
  params: URLSearchParams,
): { mode: DatabaseTlsMode } | { invalid: string } | undefined {
  const sslmode = params.get("sslmode");
  if (sslmode !== null) {
    switch (sslmode) {
      case "disable":
        return { mode: "disable" };
      case "no-verify":
        return { mode: "no-verify" };
      // pg reads all four as a verified connection; so does Pulpitum (never weaker than asked).
      case "prefer":
      case "require":
      case "verify-ca":
      case "verify-full":
        return { mode: "verify-full" };
      default:
        return { invalid: SSLMODE_FORM };
    }
  }
  const ssl = params.get("ssl");
  if (ssl === null) return undefined;
  if (ssl === "true" || ssl === "1") return { mode: "verify-full" };
  if (ssl === "false" || ssl === "0") return { mode: "disable" };
  return { invalid: "ssl=true or ssl=false (or an sslmode)" };
}

/** A host that is this machine: a loopback address, `localhost`, or a Unix socket directory. */
export function isLocalHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "" || h.startsWith("/") || h === "localhost" || h.endsWith(".localhost")) return true;
  if (isIP(h) === 4) return h.startsWith("127.");
  if (isIP(h) === 6) return h === "::1" || /^::ffff:127\./.test(h);
  return false;
}

/**
 * Decide the TLS mode of `url`. Returns a string (the accepted form) when the
 * URL's TLS parameters are invalid. Pure: reads no file.
 */
export function resolveDatabaseTls(
  url: string,
  options: DatabaseTlsOptions,
): ResolvedDatabaseTls | string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "a postgres:// or postgresql:// URL";
  }
  const params = parsed.searchParams;
  const fromUrl = modeInUrl(params);
  if (fromUrl !== undefined && "invalid" in fromUrl) return fromUrl.invalid;
  const caFile = params.get("sslrootcert") ?? options.caFile;
  const certFile = params.get("sslcert") ?? undefined;
  const keyFile = params.get("sslkey") ?? undefined;
  const hasTlsParameters = TLS_PARAMETERS.some((name) => params.has(name));
  for (const name of TLS_PARAMETERS) params.delete(name);
  // A `host` parameter overrides the authority (libpq's form for a Unix socket directory).
  const host = params.get("host") ?? parsed.hostname;
  let mode: DatabaseTlsMode;
  let decidedBy: ResolvedDatabaseTls["decidedBy"];
  if (fromUrl !== undefined) {
    mode = fromUrl.mode;
    decidedBy = "url";
  } else if (options.setting !== "auto") {
    mode = options.setting === "off" ? "disable" : "verify-full";
    decidedBy = "PULPITUM_DB_TLS";
  } else if (isLocalHost(host)) {
    mode = "disable";
    decidedBy = "loopback";
  } else {
    mode = "verify-full";
    decidedBy = "network";
  }
  return {
    connectionString: hasTlsParameters ? parsed.toString() : url,
    mode,
    decidedBy,
    caFile: mode === "disable" ? undefined : caFile,
    certFile,
    keyFile,
  };
}

/**
 * pg's `ssl` option for a resolved mode. `readFile` reads a PEM file (the
 * caller names the variable in any error).
 */
export function pgSslOption(
  tls: ResolvedDatabaseTls,
  readFile: (file: string) => string,
): false | ConnectionOptions {
  if (tls.mode === "disable") return false;
  return {
    rejectUnauthorized: tls.mode === "verify-full",
    ...(tls.caFile === undefined ? {} : { ca: readFile(tls.caFile) }),
    ...(tls.certFile === undefined ? {} : { cert: readFile(tls.certFile) }),
    ...(tls.keyFile === undefined ? {} : { key: readFile(tls.keyFile) }),
  };
}
