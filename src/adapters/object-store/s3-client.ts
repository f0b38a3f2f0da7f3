/**
 * How the S3 object store gets its client, and how it hands a caller's
 * AbortSignal to each request: the SDK cancels a request in flight when its
 * `abortSignal` aborts and rejects with an AbortError, which the store must
 * report as the signal's reason (a lost lease), never as an outage.
 */
import { S3Client, type S3ClientConfig } from "@aws-sdk/client-s3";
import type { CallOptions } from "../../ports/object-store.js";
import { httpHandlerSettings, type HttpClientTimeouts } from "../http-timeouts.js";
import { S3_CHECKSUM_SETTINGS } from "./s3-upload.js";

export interface S3ObjectStoreOptions {
  readonly bucket: string;
  /** A ready client (not destroyed by close()); otherwise one is built from the settings below. */
  readonly client?: S3Client;
  /** Extra settings for the client this store builds; the explicit options below win. */
  readonly clientConfig?: S3ClientConfig;
  /** Default us-east-1. */
  readonly region?: string;
  /** An endpoint URL such as http://127.0.0.1:4566 (moto, LocalStack); AWS when undefined. */
  readonly endpoint?: string;
  /** Path-style addressing, needed by emulators on localhost. */
  readonly forcePathStyle?: boolean;
  /** Connection and request timeouts of the client this store builds (a ready client keeps its own). */
  readonly timeouts?: HttpClientTimeouts;
  /** File bodies larger than this are uploaded in parts. Default 64 MiB. */
  readonly multipartThresholdBytes?: number;
  /** Size of each part but the last. Default 16 MiB; at least 5 MiB (S3's minimum). */
  readonly partSizeBytes?: number;
  /** Parts in flight at once. Default 4. */
  readonly partConcurrency?: number;
  /** Attempts of a conditional write that meets 409 ConditionalRequestConflict. Default 4. */
  readonly conflictAttempts?: number;
}

/** The client the options name, or one built from them (then the store owns it). */
export function s3ClientFor(options: S3ObjectStoreOptions): { client: S3Client; owned: boolean } {
  if (options.client) return { client: options.client, owned: false };
  const config: S3ClientConfig = { ...options.clientConfig };
  config.region = options.region ?? options.clientConfig?.region ?? "us-east-1";
  if (options.endpoint !== undefined) config.endpoint = options.endpoint;
  if (options.forcePathStyle !== undefined) config.forcePathStyle = options.forcePathStyle;
  if (options.timeouts !== undefined) config.requestHandler = httpHandlerSettings(options.timeouts);
  Object.assign(config, S3_CHECKSUM_SETTINGS);
  return { client: new S3Client(config), owned: true };
}

/** The SDK's per-request options for a call of the port. */
export function sendOptions(options: CallOptions): { abortSignal?: AbortSignal } {
  return options.signal === undefined ? {} : { abortSignal: options.signal };
}

/**
 * What a failed call throws when its signal aborted: the signal's reason,
 * whatever the SDK made of the cancelled request (an AbortError, a reset
 * socket). Undefined when the signal, if any, did not abort.
 */
export function abortReason(options: CallOptions): Error | undefined {
  const signal = options.signal;
  if (signal?.aborted !== true) return undefined;
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(String(reason));
}
