/**
 * How an archive is named in the database's archive binding
 * (ports/archive-binding.ts): the same archive gets the same identity
 * whichever process names it, the CLI from PULPITUM_ARCHIVE_URL or a Lambda
 * function from its bucket and prefix settings, and two archives get two.
 *
 * A bucket name is unique only within one S3 service (AWS's partition, or
 * one MinIO, R2 or emulator), so an S3 archive's identity names its service
 * first:
 *
 * - on AWS, `arn:<partition>:s3:::bucket/prefix`, AWS's own name for it:
 *   bucket names are unique per partition, so every AWS endpoint (none set,
 *   `s3.amazonaws.com`, `s3.<region>.amazonaws.com`, dual-stack, FIPS, VPC
 *   interface endpoints) reaches the same archive;
 * - on another service, its endpoint followed by bucket and prefix
 *   (`http://127.0.0.1:4566/bucket/prefix`, the path-style URL);
 * - on a service named explicitly (PULPITUM_S3_SERVICE, for one reached
 *   through a proxy or under several host names), `name:s3://bucket/prefix`.
 *
 * No form can equal another, or the `s3://bucket/prefix` that databases
 * bound before the service was part of the identity hold (which always
 * starts `s3://`, as no new form does).
 */

/** The file archive beside the embedded database under PULPITUM_HOME: it moves with the folder. */
export const EMBEDDED_ARCHIVE = "embedded";

/** The S3 service an archive lives in, as the process reaching it is configured. */
export interface S3ServiceSettings {
  /** The endpoint URL (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL); AWS when undefined. */
  readonly endpoint?: string;
  /** The client's region (AWS_REGION or AWS_DEFAULT_REGION); us-east-1 when undefined, as the client does. */
  readonly region?: string;
  /** PULPITUM_S3_SERVICE: a name that replaces the endpoint (see {@link S3_SERVICE_NAME}). */
  readonly service?: string;
}

/** What PULPITUM_S3_SERVICE accepts: a DNS-label-like name. */
export const S3_SERVICE_NAME = /^[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?$/;

/** AWS's partitions, each its own namespace of bucket names. */
export const AWS_PARTITIONS = [
  "aws",
  "aws-cn",
  "aws-us-gov",
  "aws-iso",
  "aws-iso-b",
  "aws-iso-e",
  "aws-iso-f",
] as const;

/** The domains of each partition's S3 endpoints, longest first within a suffix family. */
const AWS_DOMAINS: ReadonlyArray<readonly [suffix: string, partition: string]> = [
  ["amazonaws.com.cn", "aws-cn"],
  ["csp.hci.ic.gov", "aws-iso-f"],
  ["c2s.ic.gov", "aws-iso"],
  ["sc2s.sgov.gov", "aws-iso-b"],
  ["cloud.adc-e.uk", "aws-iso-e"],
  ["amazonaws.com", "aws"],
];

/** Region prefixes of the partitions other than `aws` (which holds every other region). */
const REGION_PARTITIONS: ReadonlyArray<readonly [prefix: string, partition: string]> = [
  ["cn-", "aws-cn"],
  ["us-gov-", "aws-us-gov"],
  ["us-isob-", "aws-iso-b"],
  ["us-isof-", "aws-iso-f"],
  ["us-iso-", "aws-iso"],
  ["eu-isoe-", "aws-iso-e"],
];

/** The AWS partition of a region; `aws` for any region outside the others' (and for none). */
export function awsPartitionOfRegion(region: string | undefined): string {
  const name = (region ?? "").trim().toLowerCase();
  return REGION_PARTITIONS.find(([prefix]) => name.startsWith(prefix))?.[1] ?? "aws";
}

/**
 * The AWS partition an endpoint URL belongs to, or undefined when it is
 * not one of AWS's own (an emulator, MinIO, R2, a proxy).
 */
export function awsPartitionOfEndpoint(endpoint: string): string | undefined {
  const host = parsedEndpoint(endpoint)?.hostname.toLowerCase();
  if (host === undefined) return undefined;
  const match = AWS_DOMAINS.find(([suffix]) => host === suffix || host.endsWith(`.${suffix}`));
  if (match === undefined) return undefined;
  // GovCloud shares amazonaws.com with the commercial partition; its host names carry its region.
  if (match[1] === "aws" && /(^|[.-])us-gov-/.test(host)) return "aws-us-gov";
  return match[1];
}

/** The service part of an S3 archive's identity (see the module header). */
export function s3ServiceOf(settings: S3ServiceSettings): string {
  const named = settings.service;
  if (named !== undefined)
    return (AWS_PARTITIONS as readonly string[]).includes(named) ? `arn:${named}` : named;
  if (settings.endpoint === undefined) return `arn:${awsPartitionOfRegion(settings.region)}`;
  const partition = awsPartitionOfEndpoint(settings.endpoint);
  return partition === undefined ? normalizedEndpoint(settings.endpoint) : `arn:${partition}`;
}

/** The identity of the archive under `prefix` in `bucket` of the service `settings` reach. */
export function s3ArchiveIdentity(
  bucket: string,
  prefix: string,
  settings: S3ServiceSettings,
): string {
  const path = `${bucket}${trimmedPrefix(prefix) === "" ? "" : `/${trimmedPrefix(prefix)}`}`;
  const service = s3ServiceOf(settings);
  if (service.startsWith("arn:")) return `${service}:s3:::${path}`;
  if (/^https?:\/\//.test(service)) return `${service}/${path}`;
  return `${service}:s3://${path}`;
}

/**
 * `s3://bucket/prefix`: how a database bound before the service was part of
 * the identity names the archive. It says nothing of the service, so it is
 * accepted only for an archive that holds the database's manifests
 * (usecases/archive-binding.ts).
 */
export function legacyS3ArchiveIdentity(bucket: string, prefix: string): string {
  const trimmed = trimmedPrefix(prefix);
  return trimmed === "" ? `s3://${bucket}` : `s3://${bucket}/${trimmed}`;
}

/** `file:///absolute/path` of a file archive's root. */
export function fileArchiveIdentity(root: string): string {
  return `file://${root.startsWith("/") ? "" : "/"}${root.replace(/\/+$/, "")}`;
}

/**
 * The endpoint as one spelling: scheme and host in lower case, the default
 * port dropped, no trailing slash, no credentials, query or fragment.
 */
function normalizedEndpoint(endpoint: string): string {
  const url = parsedEndpoint(endpoint);
  if (url === undefined) return endpoint.trim().replace(/\/+$/, "");
  return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, "")}`;
}

function parsedEndpoint(endpoint: string): URL | undefined {
  try {
    return new URL(endpoint.trim());
  } catch {
    return undefined;
  }
}

function trimmedPrefix(prefix: string): string {
  return prefix.replace(/^\/+|\/+$/g, "");
}
