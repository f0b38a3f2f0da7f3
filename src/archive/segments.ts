/**
 * Sealing a bucket's archive. Its manifest (v4 for one part, v5 for
 * several) is written only after every part it lists was verified and
 * recorded, validated against the recorded parts before it is sent, and
 * (unless the caller asks for less, see ManifestWriteChecks) read back and
 * each part re-checked by HEAD before its key is returned.
 */
import { manifestKey as contentManifestKey } from "../domain/object-keys.js";
import type { BucketPart } from "../ports/hot-store.js";
import { sha256Hex } from "./manifest.js";
import {
  buildSegmentedManifest,
  serializeArchiveManifest,
  validateArchiveManifest,
  type ArchiveManifestExpectations,
} from "./manifest-v5.js";
import { InvariantViolationError } from "../errors.js";
import {
  manifestBucketOf,
  renderManifest,
  writeVerifiedManifest,
  type ManifestWriteChecks,
  type RenderedManifest,
  type SealTarget,
} from "./store.js";

export interface SealSegmentedInput extends SealTarget {
  /** The recorded parts, in index order. */
  readonly parts: readonly BucketPart[];
}

/**
 * Write, read back and validate the manifest of a bucket's recorded parts;
 * returns its key. The one place that picks the manifest version: one part
 * is manifest v4 (byte for byte what a bucket never segmented gets),
 * several are v5.
 */
export async function sealArchiveManifest(
  input: SealSegmentedInput,
  checks: ManifestWriteChecks = {},
): Promise<string> {
  const { key, bytes, validate } = await renderArchiveManifest(input);
  await writeVerifiedManifest(input.store, key, bytes, validate, input.parts, checks);
  return key;
}

/**
 * The manifest {@link sealArchiveManifest} writes for these parts, without
 * writing it: the same input gives the same bytes (a manifest carries no
 * wall-clock time), so `pulpitum repair` can write a lost one again.
 */
export async function renderArchiveManifest(input: SealSegmentedInput): Promise<RenderedManifest> {
  const [only, ...more] = input.parts;
  if (only === undefined) {
    throw new InvariantViolationError("a manifest was asked for a bucket with no recorded part");
  }
  return more.length === 0
    ? await renderManifest({ ...input, payload: only })
    : await renderSegmentedManifest(input);
}

/** Manifest v5 for the recorded parts. */
async function renderSegmentedManifest(input: SealSegmentedInput): Promise<RenderedManifest> {
  const { store, prefix } = input;
  const bucket = manifestBucketOf(input);
  const manifest = buildSegmentedManifest({
    bucket,
    generation: input.generation,
    format: input.format,
    parts: input.parts,
    storageChecksums: await Promise.all(
      input.parts.map((part) => store.storageChecksumFor?.(part.byteLength)),
    ),
  });
  const bytes = serializeArchiveManifest(manifest);
  const key = contentManifestKey({ prefix, ...input.bucket }, sha256Hex(bytes));
  const expectations: ArchiveManifestExpectations = {
    prefix,
    bucket,
    parts: input.parts,
    format: input.format,
    generation: input.generation,
    manifestKey: key,
  };
  return { key, bytes, validate: (b) => validateArchiveManifest(b, expectations, key) };
}

// Re-verification of either version lives with the v4 one-part case in verify.ts.
export { verifyArchive, type VerifiedArchiveParts } from "./verify.js";
