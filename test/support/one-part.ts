/**
 * Tests of one-part buckets reach their payload through the one payload
 * model: the bucket's parts, of which there must be exactly one.
 */
import type { BucketId } from "../../src/domain/bucket.js";
import type { BucketPart, HotReads } from "../../src/ports/hot-store.js";

/** The bucket's only part; fails the test when it has none or several. */
export async function onlyPart(hotStore: HotReads, id: BucketId): Promise<BucketPart> {
  const parts = await hotStore.listParts(id);
  if (parts.length !== 1) {
    throw new Error(`expected one recorded part, the bucket has ${parts.length}`);
  }
  return parts[0]!;
}
