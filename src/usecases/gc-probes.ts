/**
 * The probe objects the deployed functions leave (functions/probe.ts): each
 * preflight writes one small object per writing function under
 * `{prefix}/probe/`, with a conditional create, and the functions may not
 * delete. GC removes those older than its safety age, as it removes any
 * object nothing needs. Nothing references a probe object, and no archival
 * writes under that prefix, so age alone decides; an Object Lock retention
 * keeps one until it ends, counted as GC counts locked orphans.
 */
import { joinKey } from "../domain/object-keys.js";
import { ObjectLockedError } from "../errors.js";
import { listAll, type ObjectInfo, type ObjectStore } from "../ports/object-store.js";

/** Where the functions' probe objects live, under the archive prefix. */
export const PROBE_SEGMENT = "probe";

/** The probe prefix of an archive whose key prefix is `archivePrefix` (may be empty). */
export function probePrefix(archivePrefix: string): string {
  return `${joinKey(archivePrefix, PROBE_SEGMENT)}/`;
}

/** Probe objects one GC run lists at most; a later run takes the rest. */
export const MAX_PROBES_PER_RUN = 1_000;

export interface ProbeCollection {
  /** Old probe objects: deleted, or in a dry run listed as would-delete. */
  readonly old: ReadonlyArray<{ object: ObjectInfo; action: "deleted" | "would-delete" }>;
  readonly young: number;
  readonly locked: readonly ObjectInfo[];
}

export async function collectProbeObjects(
  store: ObjectStore,
  archivePrefix: string,
  options: { readonly now: Date; readonly minAgeMs: number; readonly dryRun: boolean },
): Promise<ProbeCollection> {
  const old: Array<{ object: ObjectInfo; action: "deleted" | "would-delete" }> = [];
  const locked: ObjectInfo[] = [];
  let young = 0;
  let listed = 0;
  for await (const object of listAll(store, probePrefix(archivePrefix))) {
    if (++listed > MAX_PROBES_PER_RUN) break;
    if (options.now.getTime() - object.lastModified.getTime() < options.minAgeMs) {
      young++;
      continue;
    }
    if (options.dryRun) {
      old.push({ object, action: "would-delete" });
      continue;
    }
    try {
      await store.delete(object.key, { unlessRetained: true });
      old.push({ object, action: "deleted" });
    } catch (error) {
      if (!(error instanceof ObjectLockedError)) throw error;
      locked.push(object);
    }
  }
  return { old, young, locked };
}
