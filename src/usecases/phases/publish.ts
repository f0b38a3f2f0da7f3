/**
 * Publish: archiving -> archived (hot_deleted = false); the read cutover.
 *
 * Invariant: reads switch to the archive only for a manifest that was
 * re-read and validated in this phase against the recorded payload facts;
 * hot rows stay untouched, so until this commit the hot store serves every
 * read and nothing has been lost whatever happens.
 *
 * Ordering: verify, then commit. The commit is the single cutover point; a
 * lost reply is resolved by re-reading the state (archived with our
 * generation means it landed), never by assuming. Publishing before the
 * manifest is verified could route reads to an object that does not match.
 * The query catalog's entry is written after the commit (it must name only
 * published payloads), with one create-if-absent of its known key; if that
 * write fails or the process dies first, cleanup writes it before deleting
 * any hot row (see usecases/catalog.ts, point 5).
 *
 * Requests: the manifest is read (one GET) and each part HEADed here even
 * though seal wrote them, because this read, not seal's, is the one that
 * must vouch for what the cutover routes reads to; the parts' bytes were
 * verified by export and are re-read in full only after a takeover. The
 * HEADs go out with the manifest's GET (verifyArchive): the recorded parts
 * are what the manifest must name, so they count once it is validated.
 */
import { verifyArchive } from "../../archive/segments.js";
import { commitFenced, type PhaseInput, type StepResult } from "./step.js";
import { archiveExpectationsOf, requireSealedArchive } from "./recorded-archive.js";
import { catalogEntryOf, catalogPortsOf, writePublishedEntry } from "../catalog.js";

export async function publishBucket({
  ctx,
  heartbeat,
  metadata,
  takeover,
  afterCommit,
}: PhaseInput): Promise<StepResult> {
  const { recorded, manifestKey } = await requireSealedArchive(
    ctx.hotStore,
    metadata,
    "bucket in phase publish lacks a recorded payload or manifest",
  );
  await verifyArchive(ctx.objectStore, manifestKey, {
    ...archiveExpectationsOf(metadata, recorded),
    verifyPayloadBytes: takeover,
    tempDir: ctx.settings.tempDir,
  });

  const lease = heartbeat.lease;
  await commitFenced(
    ctx,
    lease,
    "publish",
    () => ctx.hotStore.publish(heartbeat.lease, ctx.clock.now()),
    (m) => m.state === "archived" && m.generation === lease.generation,
  );
  // The commit handed the lease on: a renewal refused from now on is no loss (see PhaseInput).
  await writePublishedEntry(
    catalogPortsOf(afterCommit),
    metadata.id,
    catalogEntryOf(recorded),
  ).catch((error: unknown) =>
    ctx.log.warn("catalog entry not written after publish; cleanup writes it", {
      error: error instanceof Error ? error.message : String(error),
    }),
  );
  return {
    kind: "committed",
    next: "cleanup",
    rows: recorded.rowCount,
    bytes: recorded.byteLength,
  };
}
