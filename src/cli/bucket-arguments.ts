/** The arguments of a command that names one bucket: TABLE PARTITION BUCKET, or TABLE BUCKET with --partition-key-b64. */
import { parseBucketKey, type BucketId } from "../domain/bucket.js";
import { parseTableId } from "../domain/table.js";
import { UsageError } from "./exit-codes.js";
import { partitionKeyFrom } from "./options.js";

/** The action of a command that names one bucket (see {@link bucketArguments}). */
export function bucketAction<O extends object>(
  usage: string,
  run: (id: BucketId, opts: O) => Promise<void>,
): (
  table: string,
  first: string,
  second: string | undefined,
  opts: O & { partitionKeyB64?: string },
) => Promise<void> {
  return async (table, first, second, opts) =>
    await run(bucketArguments(table, first, second, opts.partitionKeyB64, usage), opts);
}

/** TABLE PARTITION BUCKET, or TABLE BUCKET with --partition-key-b64. */
export function bucketArguments(
  table: string,
  first: string,
  second: string | undefined,
  partitionKeyB64: string | undefined,
  usage: string,
): BucketId {
  const tableId = parseTableId(table, "TABLE");
  const byBase64 = partitionKeyB64 !== undefined;
  if (byBase64 && second !== undefined)
    throw new UsageError(`the partition is named twice; usage: ${usage}`);
  if (!byBase64 && second === undefined)
    throw new UsageError(`the bucket key is missing; usage: ${usage}`);
  const partitionKey = partitionKeyFrom(byBase64 ? undefined : first, partitionKeyB64, usage);
  const bucketKey = parseBucketKey(byBase64 ? first : second!, undefined, "BUCKET").key;
  return { tableId, partitionKey, bucketKey };
}
