/**
 * Seal: write the manifest of the recorded parts, read it back, record it.
 *
 * Invariant: a manifest key is recorded only after the manifest was created
 * if absent, read back and validated against the recorded payload facts and
 * the bucket's identity; the payload it names exists with the recorded size.
 *
 * Ordering: the payload is recorded before the manifest is written (export),
 * so the manifest can only name verified bytes. A worker taking over from an
 * owner that never released re-verifies the payload in full first, because
 * nothing but our own record vouches for it. The manifest is
 * content-addressed, so a repeat of this phase writes no second object for
 * the same content and the record commit is fenced like every other.
 *
 * Requests: one create of the manifest. The parts are not HEADed again:
 * export read each one back and verified it before recording it, an owner
 * that released its lease vouches for that by its commit (a takeover
 * re-verifies instead, above), and nothing deletes a recorded part of a
 * bucket in flight (GC counts it as a reference). A manifest this call
 * created is not read back: it was validated before it was sent, the store
 * checked its SHA-256 on arrival, and publish re-reads and validates it
 * before the cutover. One that already existed is read back and compared.
 */
import { verifyPayload } from "../../archive/verify.js";
import { sealArchiveManifest } from "../../archive/segments.js";
import { commitFenced, type PhaseInput, type StepResult } from "./step.js";
import { requireRecordedArchive } from "./recorded-archive.js";

export async function sealBucket({
  ctx,
  heartbeat,
  metadata,
  takeover,
}: PhaseInput): Promise<StepResult> {
  const recorded = await requireRecordedArchive(
    ctx.hotStore,
    metadata,
    `bucket in phase seal has no recorded payload (generation ${metadata.generation})`,
  );
  const { format, parts } = recorded;
  if (takeover) {
    for (const part of parts) await verifyPayload(ctx.objectStore, part, format);
  }

  const lease = heartbeat.lease;
  const manifestKey = await sealArchiveManifest(
    {
      store: ctx.objectStore,
      prefix: ctx.settings.archivePrefix,
      bucket: metadata.id,
      strategy: metadata.strategy,
      start: metadata.start,
      end: metadata.end,
      generation: lease.generation,
      format,
      parts,
    },
    { readBackCreated: false, checkPayloads: false },
  );

  await commitFenced(
    ctx,
    lease,
    "record manifest",
    () => ctx.hotStore.recordManifest(heartbeat.lease, ctx.clock.now(), manifestKey),
    (m) => m.generation === lease.generation && m.manifestKey === manifestKey,
  );
  return { kind: "committed", next: "publish" };
}
