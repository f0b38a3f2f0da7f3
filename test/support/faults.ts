/**
 * Failure injection for the workflow tests. Wrappers around the real ports
 * take a failure point, in the spirit of meterstore's `FailAt`:
 *
 * - `crash`: the process dies at that point. Before: the operation never
 *   happens. After: it happened, and nobody heard. Every later call from the
 *   same process life throws too, so no cleanup code can run, just as in a
 *   real crash; the test then continues with a fresh process life.
 * - `ambiguous`: the operation landed but its reply was lost
 *   (AmbiguousCommitError); the process lives on.
 * - `error`: the operation fails before taking effect with a transient
 *   error (an outage: it does not count toward quarantine); the process
 *   lives on.
 * - `integrity`: the operation fails before taking effect with a failure
 *   that is the bucket's own (an object store finds the object corrupt, the
 *   hot store an invariant broken): it counts toward quarantine.
 * - `hook`: run arbitrary code at that point (advance a clock, start a rival).
 */
import {
  AmbiguousCommitError,
  ArchiveIntegrityError,
  InvariantViolationError,
  TransientStoreError,
} from "../../src/errors.js";
import type { HotStore, StoreLifecycle } from "../../src/ports/hot-store.js";
import type { ObjectFault, ObjectOperation } from "../../src/adapters/object-store/memory.js";
import type { ObjectStore } from "../../src/ports/object-store.js";

export class SimulatedCrash extends Error {
  constructor(point: string) {
    super(`simulated crash at ${point}`);
    this.name = "SimulatedCrash";
  }
}

/** One process's life: once crashed, every port call from it fails. */
export class ProcessLife {
  #crashedAt: string | undefined;
  /** Failure points that fired in this life. */
  fired = 0;
  get dead(): boolean {
    return this.#crashedAt !== undefined;
  }
  crash(point: string): never {
    this.#crashedAt = point;
    throw new SimulatedCrash(point);
  }
  check(): void {
    if (this.#crashedAt !== undefined)
      throw new SimulatedCrash(`${this.#crashedAt} (process already dead)`);
  }
}

/**
 * Every method of the hot store port but opening and closing: what a
 * failure point can name. Derived from the port, so a method added to any
 * of its roles can be named at once.
 */
export type HotOperation = Exclude<keyof HotStore, keyof StoreLifecycle>;
export type FaultKind = "crash" | "ambiguous" | "error" | "integrity" | "hook";

export interface FaultPoint<Op extends string> {
  readonly operation: Op;
  readonly when: "before" | "after";
  readonly kind: FaultKind;
  /** Fire on the nth matching call (1-based); default 1. */
  readonly nth?: number;
  /** For object operations: only keys containing this text. */
  readonly keyIncludes?: string;
  readonly hook?: () => void | Promise<void>;
}

function matcher<Op extends string>(point: FaultPoint<Op> | undefined) {
  let seen = 0;
  let fired = false;
  return (operation: string, when: "before" | "after", key = ""): boolean => {
    if (!point || fired || point.operation !== operation || point.when !== when) return false;
    if (point.keyIncludes !== undefined && !key.includes(point.keyIncludes)) return false;
    seen++;
    if (seen !== (point.nth ?? 1)) return false;
    fired = true;
    return true;
  };
}

/**
 * The methods `store` answers to: its own and its prototypes' (a class
 * instance, an object literal or another wrapper alike).
 */
function methodNames(store: object): string[] {
  const names = new Set<string>();
  for (
    let layer: object | null = store;
    layer !== null && layer !== Object.prototype;
    layer = Object.getPrototypeOf(layer) as object | null
  ) {
    for (const name of Object.getOwnPropertyNames(layer)) {
      if (name !== "constructor" && typeof Reflect.get(store, name) === "function") names.add(name);
    }
  }
  return [...names];
}

/**
 * A HotStore that behaves like `inner` except at its failure points. Every
 * method `inner` has gets a failure point, whatever role of the port it
 * belongs to (so a new method cannot slip past the harness), except
 * `migrate`, passed through, and `close`, a no-op: a test closes the real
 * store itself, after the simulated process lives that shared it. The
 * wrapper is a plain object of own methods, so a test can spread it and
 * override one.
 */
export function faultyHotStore(
  inner: HotStore,
  life: ProcessLife,
  points?: FaultPoint<HotOperation> | readonly FaultPoint<HotOperation>[],
): HotStore {
  const list =
    points === undefined
      ? []
      : Array.isArray(points)
        ? points
        : [points as FaultPoint<HotOperation>];
  const matchers = list.map((point) => ({ point, matches: matcher(point) }));
  const firing = (operation: string, when: "before" | "after") =>
    matchers.find((m) => m.matches(operation, when))?.point;
  const wrapped: Record<string, unknown> = {};
  for (const operation of methodNames(inner)) {
    const method = Reflect.get(inner, operation) as (...args: unknown[]) => Promise<unknown>;
    wrapped[operation] = async (...args: unknown[]) => {
      life.check();
      const before = firing(operation, "before");
      if (before) await fire(before, life, `${operation}:before`);
      const result = await method.apply(inner, args);
      life.check();
      const after = firing(operation, "after");
      if (after) {
        if (after.kind === "ambiguous") {
          life.fired++;
          throw new AmbiguousCommitError(`${operation} (injected)`);
        }
        await fire(after, life, `${operation}:after`);
      }
      return result;
    };
  }
  const lifecycle: StoreLifecycle = { migrate: () => inner.migrate(), close: async () => {} };
  return Object.assign(wrapped, lifecycle) as unknown as HotStore;
}

async function fire<Op extends string>(
  point: FaultPoint<Op>,
  life: ProcessLife,
  where: string,
): Promise<void> {
  life.fired++;
  switch (point.kind) {
    case "crash":
      life.crash(where);
    // falls through: crash never returns
    case "error":
      throw new TransientStoreError(`injected failure at ${where}`);
    case "integrity":
      throw new InvariantViolationError(`injected failure at ${where}`);
    case "ambiguous":
      throw new AmbiguousCommitError(`${where} (injected before the operation: nothing landed)`);
    case "hook":
      await point.hook?.();
      return;
  }
}

/**
 * An object-store fault hook (for MemoryObjectStore) bound to a process life:
 * every operation of a dead process fails, and the failure point fires once.
 */
export function objectFault(life: ProcessLife, point?: FaultPoint<ObjectOperation>): ObjectFault {
  const matches = matcher(point);
  return (operation, key, when) => {
    life.check();
    if (!matches(operation, when, key)) return;
    life.fired++;
    const where = `${operation}:${when}:${key}`;
    switch (point!.kind) {
      case "crash":
        life.crash(where);
        break;
      case "error":
      case "ambiguous":
        throw new TransientStoreError(`injected failure at ${where}`);
      case "integrity":
        throw new ArchiveIntegrityError(key, `injected failure at ${where}`);
      case "hook":
        void point!.hook?.();
    }
  };
}

/** Any ObjectStore (S3, filesystem) with the same failure points as {@link objectFault}. */
export function faultyObjectStore(
  inner: ObjectStore,
  life: ProcessLife,
  point?: FaultPoint<ObjectOperation>,
): ObjectStore {
  const hook = objectFault(life, point);
  const wrap =
    <A extends unknown[], R>(
      operation: ObjectOperation,
      fn: (key: string, ...rest: A) => Promise<R>,
    ) =>
    async (key: string, ...rest: A): Promise<R> => {
      hook(operation, key, "before");
      const result = await fn.call(inner, key, ...rest);
      hook(operation, key, "after");
      return result;
    };
  return {
    createIfAbsent: wrap("createIfAbsent", inner.createIfAbsent),
    replace: wrap("replace", inner.replace),
    get: wrap("get", inner.get),
    getStream: wrap("getStream", inner.getStream),
    head: wrap("head", inner.head),
    list: wrap("list", inner.list),
    delete: wrap("delete", inner.delete),
    uri: (key: string) => inner.uri(key),
  };
}
