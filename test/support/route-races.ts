/**
 * Races around a bucket's route, shared by the expiry tests on every
 * backend: a reader whose hot store runs `between` right after it hands out
 * an archive route, and an object store that runs `before` ahead of the
 * first GET of a matching key (a scrub or reader mid-read).
 */
import type { BucketId } from "../../src/domain/bucket.js";
import type { HotStore } from "../../src/ports/hot-store.js";
import type { ObjectStore } from "../../src/ports/object-store.js";
import { DurableTable } from "../../src/read/durable-table.js";
import type { Harness } from "./workflow-harness.js";

/** A reader of `h` that runs `between` once, right after it is given `id`'s archive route. */
export function readerHoldingRoute<O extends ObjectStore>(
  h: Harness<O>,
  id: BucketId,
  between: () => Promise<void>,
): DurableTable {
  let fired = false;
  const hotStore = new Proxy(h.inner, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (property !== "readBucket" || typeof value !== "function") return value;
      return async (...args: Parameters<HotStore["readBucket"]>) => {
        const read = await target.readBucket(...args);
        if (!fired && read.route === "archive" && args[0].bucketKey === id.bucketKey) {
          fired = true;
          await between();
        }
        return read;
      };
    },
  });
  return new DurableTable({
    hotStore,
    objectStore: h.objects,
    clock: h.clock,
    archivePrefix: h.settings.archivePrefix,
  });
}

/** `objects`, running `before` once ahead of the first GET of a key containing `keyIncludes`. */
export function objectsFiringOnGet<O extends ObjectStore>(
  objects: O,
  keyIncludes: string,
  before: () => Promise<void>,
): { readonly objects: O; fired(): boolean } {
  let fired = false;
  const proxy = new Proxy(objects, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (property !== "get" || typeof value !== "function") return value;
      return async (...args: Parameters<ObjectStore["get"]>) => {
        if (!fired && args[0].includes(keyIncludes)) {
          fired = true;
          await before();
        }
        return await (target as ObjectStore).get(...args);
      };
    },
  });
  return { objects: proxy, fired: () => fired };
}
