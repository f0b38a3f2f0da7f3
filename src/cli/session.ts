/**
 * What every command that touches the stores does first: validate the whole
 * configuration (warning about variables nothing reads), open the adapters,
 * and close it however the command ends.
 */
import { unknownVariableWarnings, type PulpitumConfig } from "../config.js";
import { loadConfig, openAdapters, type Adapters } from "../open-adapters.js";
import type { WorkflowLog } from "../usecases/context.js";
import { stderrLog } from "./log.js";

let commandLine = "pulpitum";
let warned = false;

/** Called by `main` for each invocation: names the process in the embedded store's lock. */
export function beginInvocation(argv: readonly string[]): void {
  commandLine = ["pulpitum", ...argv].join(" ");
  warned = false;
}

export function warn(message: string): void {
  process.stderr.write(`pulpitum: warning: ${message}\n`);
}

/** The validated configuration; unknown ARCHIVER_ and PULPITUM_ variables are reported once. */
export function loadCliConfig(env: NodeJS.ProcessEnv = process.env): PulpitumConfig {
  if (!warned) {
    warned = true;
    for (const warning of unknownVariableWarnings(env)) warn(warning);
  }
  return loadConfig(env);
}

/** The structured log on stderr; `PULPITUM_LOG=debug` adds the info lines. */
export function cliLog(): WorkflowLog {
  return stderrLog(process.env.PULPITUM_LOG?.trim() === "debug");
}

export async function withRuntime<T>(
  fn: (runtime: Adapters) => Promise<T>,
  options: { migrate?: boolean; env?: NodeJS.ProcessEnv } = {},
): Promise<T> {
  const config = loadCliConfig(options.env);
  const runtime = await openAdapters(config, { migrate: options.migrate, command: commandLine });
  const stale = runtime.lock?.tookOverFrom;
  if (stale) {
    warn(
      `took over the embedded store's lock from process ${stale.pid} (\`${stale.command}\`, since ${stale.since}), which is no longer running`,
    );
  }
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
  }
}
