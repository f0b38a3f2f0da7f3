/**
 * Hooks that stretch a garbage-collection pass the way a large archive and a
 * busy fleet do: one key per listing page, so objects created while the pass
 * runs are listed after they appear, and a hook that runs once right after
 * the pass has read its first page of a table's references.
 */
import { ForwardingObjectStore } from "../../src/adapters/object-store/forwarding.js";
import type { ArchiveReference, HotStore } from "../../src/ports/hot-store.js";
import type * as port from "../../src/ports/object-store.js";

/** Lists one key per page. */
export class OneKeyPages extends ForwardingObjectStore {
  override async list(prefix: string, options?: port.ListOptions): Promise<port.ListPage> {
    return await super.list(prefix, { ...options, maxKeys: 1 });
  }
}

/** The hot store GC sees: `afterRead` runs once, on the first page of references read, and may change it. */
export function referencesHook(
  inner: HotStore,
  afterRead: (page: ArchiveReference[]) => Promise<ArchiveReference[]>,
): HotStore {
  let fired = false;
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === "listArchiveReferences") {
        return async (...args: Parameters<HotStore["listArchiveReferences"]>) => {
          const page = await target.listArchiveReferences(...args);
          if (fired) return page;
          fired = true;
          return await afterRead(page);
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
