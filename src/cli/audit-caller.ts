/**
 * Who runs this `pulpitum` command, as the audit trail records it: the
 * operating-system user and host. The database user is recorded by the
 * database itself (adapters/sql/audit-trail.ts).
 */
import os from "node:os";
import type { AuditCaller } from "../ports/audit-trail.js";
import type { Adapters } from "../open-adapters.js";
import type { AuditContext } from "../usecases/audit.js";
import { cliLog } from "./session.js";

/** The OS user's name; a uid when the system has no name for it (a container without /etc/passwd entry). */
function osUser(): string {
  try {
    return os.userInfo().username;
  } catch {
    return typeof process.getuid === "function" ? `uid ${process.getuid()}` : "unknown";
  }
}

export function cliCaller(): AuditCaller {
  return { kind: "cli", osUser: osUser(), host: os.hostname() };
}

/** The audit trail of the open adapters, with the command's log. */
export function cliAudit(rt: Pick<Adapters, "audit">): AuditContext {
  return { audit: rt.audit, log: cliLog() };
}
