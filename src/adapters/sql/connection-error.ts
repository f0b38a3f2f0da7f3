import { PulpitumError, errorMessage } from "../../errors.js";

/**
 * The external database could not be reached or refused the connection. The
 * message names the server (host, port, database, user) and never the
 * password, which is scrubbed from the driver's text as well.
 */
export class DatabaseUnreachableError extends PulpitumError {
  readonly host: string;

  constructor(server: DatabaseServer, reason: string, options: { cause?: unknown } = {}) {
    super(
      `cannot use the database at ${server.host}:${server.port} (database ${JSON.stringify(server.database)}, ` +
        `user ${JSON.stringify(server.user)}, from DATABASE_URL): ${reason}. Check that the server is ` +
        `running and reachable from here and that DATABASE_URL names it.`,
      { ...options, retryable: true },
    );
    this.host = server.host;
  }

  static from(url: string, error: unknown): DatabaseUnreachableError {
    const server = describeServer(url);
    let reason = connectionFailureText(error);
    if (server.password !== "") reason = reason.split(server.password).join("***");
    return new DatabaseUnreachableError(server, reason, { cause: error });
  }
}

interface DatabaseServer {
  readonly host: string;
  readonly port: string;
  readonly database: string;
  readonly user: string;
  readonly password: string;
}

/** The parts of a postgres:// URL that identify the server, with pg's defaults. */
export function describeServer(url: string): DatabaseServer {
  try {
    const parsed = new URL(url);
    const host =
      parsed.hostname !== "" ? parsed.hostname : (parsed.searchParams.get("host") ?? "localhost");
    return {
      host,
      port: parsed.port !== "" ? parsed.port : (parsed.searchParams.get("port") ?? "5432"),
      database: decodeURIComponent(parsed.pathname.replace(/^\//, "")) || "(the user's default)",
      user: decodeURIComponent(parsed.username) || "(the login user)",
      password: decodeURIComponent(parsed.password),
    };
  } catch {
    return { host: "?", port: "?", database: "?", user: "?", password: "" };
  }
}

/**
 * The driver's reason, readable: Node reports a refused `localhost` (tried
 * on ::1 and 127.0.0.1) as an AggregateError with an empty message.
 */
function connectionFailureText(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return [...new Set(error.errors.map(errorMessage))].join("; ");
  }
  const text = errorMessage(error);
  return text === "" ? String(error) : text;
}
