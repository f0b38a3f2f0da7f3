import type { WorkflowLog } from "../usecases/context.js";

/** Structured log lines on stderr (stdout stays for data). */
export function stderrLog(verbose: boolean): WorkflowLog {
  const write = (level: string, message: string, fields?: Record<string, unknown>) => {
    if (level === "info" && !verbose) return;
    const extra = fields ? ` ${JSON.stringify(fields)}` : "";
    process.stderr.write(`${new Date().toISOString()} ${level} ${message}${extra}\n`);
  };
  return {
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
  };
}
