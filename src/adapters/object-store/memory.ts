import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { ObjectNotFoundError } from "../../errors.js";
import type * as port from "../../ports/object-store.js";
import * as keys from "./keys.js";

export type ObjectOperation =
  "createIfAbsent" | "replace" | "get" | "getStream" | "head" | "list" | "delete";

/**
 * A fault hook: called before and after each operation takes effect; throwing
 * injects the failure at exactly that point (an "after" throw on
 * createIfAbsent is a crash after upload: the object exists, the caller never
 * hears so).
 */
export type ObjectFault = (
  operation: ObjectOperation,
  key: string,
  when: "before" | "after",
) => void;

/** An honest in-memory object store for unit tests, with fault injection. */
export class MemoryObjectStore implements port.ObjectStore {
  readonly #objects = new Map<string, { bytes: Uint8Array; lastModified: Date }>();
  #fault: ObjectFault | undefined;
  /** Operation counts, for tests that assert request budgets. */
  readonly calls: Record<ObjectOperation, number> = {
    createIfAbsent: 0,
    replace: 0,
    get: 0,
    getStream: 0,
    head: 0,
    list: 0,
    delete: 0,
  };

  constructor(options: { fault?: ObjectFault } = {}) {
    this.#fault = options.fault;
  }

  /** Replace (or clear) the fault hook. */
  injectFault(fault: ObjectFault | undefined): void {
    this.#fault = fault;
  }

  /** Overwrite an object behind the port's back, to simulate corruption. */
  tamper(key: string, bytes: Uint8Array): void {
    this.#objects.set(key, { bytes: new Uint8Array(bytes), lastModified: new Date() });
  }

  keys(): string[] {
    return [...this.#objects.keys()].sort();
  }

  /** Files and memory keep no checksum of their own; the manifest's SHA-256 is the only one. */
  async storageChecksumFor(): Promise<undefined> {
    return undefined;
  }

  /** `memory:///key`: no engine reads it, but it names the object unambiguously. */
  async uri(key: string): Promise<string> {
    keys.validateObjectKey(key);
    return `memory:///${key}`;
  }

  #hook(operation: ObjectOperation, key: string, when: "before" | "after"): void {
    this.#fault?.(operation, key, when);
  }

  async createIfAbsent(key: string, body: port.ObjectBody): Promise<port.CreateResult> {
    keys.validateObjectKey(key);
    this.calls.createIfAbsent++;
    this.#hook("createIfAbsent", key, "before");
    const bytes =
      body instanceof Uint8Array
        ? new Uint8Array(body)
        : new Uint8Array(await readFile(body.filePath));
    if (!(body instanceof Uint8Array) && bytes.byteLength !== body.byteLength) {
      throw keys.fileBodyLengthMismatch(body.filePath, body.byteLength, bytes.byteLength);
    }
    let result: port.CreateResult = "already-exists";
    if (!this.#objects.has(key)) {
      this.#objects.set(key, { bytes, lastModified: new Date() });
      result = "created";
    }
    this.#hook("createIfAbsent", key, "after");
    return result;
  }

  async replace(key: string, body: Uint8Array): Promise<void> {
    keys.validateObjectKey(key);
    this.calls.replace++;
    this.#hook("replace", key, "before");
    this.#objects.set(key, { bytes: new Uint8Array(body), lastModified: new Date() });
    this.#hook("replace", key, "after");
  }

  async get(key: string, range?: port.ByteRange): Promise<Uint8Array> {
    keys.validateObjectKey(key);
    if (range) keys.validateByteRange(range, key);
    this.calls.get++;
    this.#hook("get", key, "before");
    const object = this.#objects.get(key);
    if (!object) throw new ObjectNotFoundError(key);
    const bytes = range
      ? object.bytes.slice(range.start, Math.min(range.end, object.bytes.byteLength))
      : object.bytes.slice();
    this.#hook("get", key, "after");
    return bytes;
  }

  async getStream(key: string): Promise<AsyncIterable<Uint8Array>> {
    keys.validateObjectKey(key);
    this.calls.getStream++;
    this.#hook("getStream", key, "before");
    const object = this.#objects.get(key);
    if (!object) throw new ObjectNotFoundError(key);
    const bytes = object.bytes.slice();
    this.#hook("getStream", key, "after");
    return (async function* () {
      const chunk = 64 * 1024;
      for (let i = 0; i < bytes.byteLength; i += chunk) yield bytes.subarray(i, i + chunk);
    })();
  }

  async head(key: string, options: port.HeadOptions = {}): Promise<port.ObjectInfo | null> {
    keys.validateObjectKey(key);
    this.calls.head++;
    this.#hook("head", key, "before");
    const object = this.#objects.get(key);
    this.#hook("head", key, "after");
    if (!object) return null;
    const found = { key, size: object.bytes.byteLength, lastModified: object.lastModified };
    return options.checksum === true
      ? { ...found, sha256: createHash("sha256").update(object.bytes).digest("hex") }
      : found;
  }

  async list(prefix: string, options: port.ListOptions = {}): Promise<port.ListPage> {
    keys.validateListPrefix(prefix);
    this.calls.list++;
    this.#hook("list", prefix, "before");
    const maxKeys = options.maxKeys ?? 1000;
    const after = options.continuationToken ?? options.startAfter ?? "";
    const matching = this.keys().filter((k) => k.startsWith(prefix) && k > after);
    const page = matching.slice(0, maxKeys);
    const objects = page.map((key) => {
      const o = this.#objects.get(key)!;
      return { key, size: o.bytes.byteLength, lastModified: o.lastModified };
    });
    this.#hook("list", prefix, "after");
    return {
      objects,
      continuationToken: matching.length > maxKeys ? page[page.length - 1] : undefined,
    };
  }

  async delete(key: string): Promise<void> {
    keys.validateObjectKey(key);
    this.calls.delete++;
    this.#hook("delete", key, "before");
    this.#objects.delete(key);
    this.#hook("delete", key, "after");
  }
}
