/**
 * The temporary directory's disk, named when it fills up: payload files are
 * written there before upload (one part at a time) and verified copies are
 * downloaded there before a read, so its remedy is its own (TMPDIR, smaller
 * parts), not the archive folder's or the database's.
 */
import { causeChain } from "../domain/failures.js";
import { DiskFullError, isNoSpace } from "../errors.js";

const TEMP_DIR_REMEDY =
  "free space there, or point TMPDIR at a folder on a larger disk; a smaller ARCHIVER_SEGMENT_BYTES makes " +
  "each payload part's temporary file smaller (a worker Lambda: raise its ephemeral storage)";

/**
 * `error` as the full disk of the temporary directory `dir` when it is a
 * "no space" (ENOSPC, EDQUOT) no adapter has named yet; else `error` as it is.
 */
export function tempDiskFull(error: unknown, dir: string): unknown {
  const chain = causeChain(error);
  if (chain.some((e) => e instanceof DiskFullError) || !chain.some(isNoSpace)) return error;
  return new DiskFullError("the temporary directory's disk", dir, TEMP_DIR_REMEDY, {
    cause: error,
  });
}
