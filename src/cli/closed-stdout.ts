/**
 * A reader that stops early (`pulpitum read … --json | head`) closes the pipe;
 * the next write fails with EPIPE. That is the reader's choice, not a
 * failure of the command: it stops at once, quietly, with exit code 0, as a
 * Unix tool stops on SIGPIPE (Node ignores the signal and reports the error
 * instead, as an unhandled `error` event with a stack trace). Work in flight
 * is abandoned as after a kill: leases expire and the embedded store's lock
 * is taken over.
 */
import { EXIT } from "./exit-codes.js";

let installed = false;

/** Stop the process quietly when stdout or stderr is closed by its reader. Idempotent. */
export function stopQuietlyWhenOutputCloses(): void {
  if (installed) return;
  installed = true;
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EPIPE") process.exit(EXIT.ok);
      throw error;
    });
  }
}
