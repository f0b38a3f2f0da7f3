/**
 * How an archive is named in the database's archive binding
 * (ports/archive-binding.ts): the same archive gets the same identity
 * whichever process names it, the CLI from PULPITUM_ARCHIVE_URL or a Lambda
 * function from its bucket and prefix settings.
 */

/** The file archive beside the embedded database under PULPITUM_HOME: it moves with the folder. */
export const EMBEDDED_ARCHIVE = "embedded";

/** `s3://bucket/prefix`, the prefix without leading or trailing slashes (none: `s3://bucket`). */
export function s3ArchiveIdentity(bucket: string, prefix: string): string {
  const trimmed = prefix.replace(/^\/+|\/+$/g, "");
  return trimmed === "" ? `s3://${bucket}` : `s3://${bucket}/${trimmed}`;
}

/** `file:///absolute/path` of a file archive's root. */
export function fileArchiveIdentity(root: string): string {
  return `file://${root.startsWith("/") ? "" : "/"}${root.replace(/\/+$/, "")}`;
}
