import { InvalidInputError } from "../errors.js";
import type { BucketStrategy } from "./bucket.js";
import type { LifecyclePolicy } from "./table-policy.js";

/** A stable physical table id; it appears in every storage key, object key and manifest. */
export type TableId = string & { readonly __tableId: unique symbol };

const TABLE_ID = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const TABLE_ID_RULE =
  "1-63 characters of lowercase letters, digits, '_' and '-', starting with a letter or digit";

export function parseTableId(text: string, input = "table id"): TableId {
  if (!TABLE_ID.test(text)) {
    throw new InvalidInputError(
      `${input} ${JSON.stringify(text)}`,
      "is not a valid table id",
      TABLE_ID_RULE,
    );
  }
  return text as TableId;
}

export type ArchiveFormat = "parquet" | "json";
export const ARCHIVE_FORMATS: readonly ArchiveFormat[] = ["parquet", "json"];

export function parseArchiveFormat(text: string, input = "archive format"): ArchiveFormat {
  if (text === "parquet" || text === "json") return text;
  throw new InvalidInputError(
    `${input} ${JSON.stringify(text)}`,
    "is not a known format",
    "parquet or json",
  );
}

/**
 * What the registry holds for one table: its policy (format, ingestion
 * guard, pause and lifecycle, domain/table-policy.ts), versioned.
 */
export interface TableDefinition extends LifecyclePolicy {
  readonly tableId: TableId;
  readonly strategy: BucketStrategy;
  readonly format: ArchiveFormat;
  /**
   * Ingestion guard counted in the strategy's buckets: appends are accepted for
   * the current bucket and the `writableBuckets - 1` before it. Null: no guard.
   * This is not the archival cutoff.
   */
  readonly writableBuckets: number | null;
  readonly paused: boolean;
  /** A drop of the table has started (`pulpitum tables drop`): its buckets are being removed. */
  readonly dropping?: boolean;
  /**
   * The policy's version: 1 at registration, one more at every change of any
   * field above (`pulpitum tables alter`, pause, resume). Statements that act
   * on a decision taken from the policy require the version they read.
   */
  readonly policyVersion: number;
  /** When the policy last changed (the registration's time for version 1). */
  readonly policyChangedAt: Date;
}
