import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore, TEMP_FILE_PREFIX } from "../../src/adapters/object-store/filesystem.js";
import { archivePrefix, openObjectStore } from "../../src/adapters/object-store/index.js";
import { LazyObjectStore } from "../../src/adapters/object-store/lazy.js";
import { MemoryObjectStore } from "../../src/adapters/object-store/memory.js";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { InvalidInputError, ObjectNotFoundError } from "../../src/errors.js";
import { listAll } from "../../src/ports/object-store.js";
import { objectStoreConformance } from "./object-store.js";

objectStoreConformance("memory", async () => ({
  store: new MemoryObjectStore(),
  cleanup: async () => undefined,
}));

objectStoreConformance("filesystem", async () => {
  const root = await mkdtemp(path.join(os.tmpdir(), "pulpitum-fs-store-"));
  return {
    store: new FileObjectStore(root),
    cleanup: async () => rm(root, { recursive: true, force: true }),
  };
});

objectStoreConformance("filesystem, opened on first use", async () => {
  const root = await mkdtemp(path.join(os.tmpdir(), "pulpitum-lazy-store-"));
  return {
    store: new LazyObjectStore(async () => new FileObjectStore(root)),
    cleanup: async () => rm(root, { recursive: true, force: true }),
  };
});

describe("LazyObjectStore", () => {
  it("opens its store at the first call, once, and forgets an open that failed", async () => {
    let opens = 0;
    let fail = true;
    const inner = new MemoryObjectStore();
    const lazy = new LazyObjectStore(async () => {
      opens++;
      if (fail) throw new Error("endpoint unreachable");
      return inner;
    });

    expect(lazy.opened).toBe(false);
    await expect(lazy.head("k")).rejects.toThrow("endpoint unreachable");
    expect(lazy.opened).toBe(false);
    fail = false;
    expect(await lazy.createIfAbsent("k", new TextEncoder().encode("v"))).toBe("created");
    expect(await Promise.all([lazy.head("k"), lazy.get("k")])).toMatchObject([
      { key: "k", size: 1 },
      new TextEncoder().encode("v"),
    ]);

    expect(opens).toBe(2);
    expect(lazy.opened).toBe(true);
  });

  it("closes without opening a store it never opened", async () => {
    let opens = 0;
    const lazy = new LazyObjectStore(async () => {
      opens++;
      return new MemoryObjectStore();
    });

    await lazy.close();

    expect(opens).toBe(0);
  });
});

/** Every path under `dir`, relative, files and directories alike. */
async function tree(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true });
  return entries.map((e) => e.split(path.sep).join("/")).sort();
}

async function keysOf(store: FileObjectStore, prefix = ""): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of listAll(store, prefix)) keys.push(o.key);
  return keys;
}

describe("FileObjectStore URIs", () => {
  it("names an object by the file URL of the file holding its bytes, even with a colon or a space in the key", async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), "pulpitum uri "));
    try {
      const store = new FileObjectStore(root);
      const key = "v4/chat/Yy0x/month:2025-03/payloads/a b.json";
      await store.createIfAbsent(key, new TextEncoder().encode("bytes"));

      const uri = await store.uri(key);

      expect(uri.startsWith("file:///")).toBe(true);
      expect(await readFile(fileURLToPath(uri), "utf8")).toBe("bytes");
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("FileObjectStore", () => {
  let base: string;
  let root: string;
  let store: FileObjectStore;
  const bytes = (s: string) => new TextEncoder().encode(s);

  beforeEach(async () => {
    base = await mkdtemp(path.join(os.tmpdir(), "pulpitum-fs-specific-"));
    root = path.join(base, "root");
    store = new FileObjectStore(root);
  });

  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it("creates the root on the first write", async () => {
    expect(await store.createIfAbsent("a/b", bytes("x"))).toBe("created");

    expect((await stat(root)).isDirectory()).toBe(true);
    expect(await tree(root)).toEqual(["a", "a/b"]);
  });

  it("lists an absent root as empty rather than failing", async () => {
    expect(await store.list("")).toEqual({ objects: [], continuationToken: undefined });
    expect(await store.head("a")).toBeNull();
  });

  it("leaves no temporary file behind after creates that won, lost or failed", async () => {
    await Promise.all(
      Array.from({ length: 16 }, (_, i) => store.createIfAbsent("t/k", bytes(`v${i}`))),
    );
    await expect(
      store.createIfAbsent("t/from-missing-file", {
        filePath: path.join(base, "missing"),
        byteLength: 1,
      }),
    ).rejects.toBeInstanceOf(InvalidInputError);
    const shortFile = path.join(base, "short");
    await writeFile(shortFile, "abc");
    await expect(
      store.createIfAbsent("t/short", { filePath: shortFile, byteLength: 4 }),
    ).rejects.toBeInstanceOf(InvalidInputError);

    expect(await tree(root)).toEqual(["t", "t/k"]);
  });

  it("never shows a temporary file in list while creates are in flight", async () => {
    const big = randomBytes(2 * 1024 * 1024);
    const creates = Array.from({ length: 8 }, (_, i) => store.createIfAbsent(`w/k${i}`, big));
    const observed = new Set<string>();
    let settled = false;
    const done = Promise.all(creates).finally(() => {
      settled = true;
    });
    while (!settled) {
      for (const o of (await store.list("w/")).objects) observed.add(o.key);
      await new Promise((r) => setImmediate(r));
    }
    await done;

    expect([...observed].every((k) => /^w\/k\d$/.test(k))).toBe(true);
    expect(await keysOf(store, "w/")).toEqual(Array.from({ length: 8 }, (_, i) => `w/k${i}`));
  });

  it("ignores a .tmp-* file left by a crash: not listed, not an object, not blocking a create", async () => {
    await mkdir(path.join(root, "c"), { recursive: true });
    const leftover = path.join(root, "c", `${TEMP_FILE_PREFIX}0b9e4a4e-crashed`);
    await writeFile(leftover, "half written");
    await mkdir(path.join(root, `${TEMP_FILE_PREFIX}dir`), { recursive: true });
    await writeFile(path.join(root, `${TEMP_FILE_PREFIX}dir`, "x"), "y");

    expect(await keysOf(store)).toEqual([]);
    expect(await store.createIfAbsent("c/object", bytes("whole"))).toBe("created");
    expect(await keysOf(store)).toEqual(["c/object"]);
    expect(await store.get("c/object")).toEqual(bytes("whole"));
    expect((await stat(leftover)).size).toBe(12);
  });

  it("reserves key segments starting with .tmp- so no object can hide as a temporary file", async () => {
    for (const key of [
      `${TEMP_FILE_PREFIX}x`,
      `a/${TEMP_FILE_PREFIX}x`,
      `${TEMP_FILE_PREFIX}d/x`,
    ]) {
      await expect(store.createIfAbsent(key, bytes("x"))).rejects.toBeInstanceOf(InvalidInputError);
      await expect(store.get(key)).rejects.toBeInstanceOf(InvalidInputError);
    }
    expect(await store.list(TEMP_FILE_PREFIX)).toEqual({
      objects: [],
      continuationToken: undefined,
    });
  });

  it("keeps every accepted key strictly inside the root and rejects escapes before touching disk", async () => {
    const outside = path.join(base, "x");
    for (const key of ["../x", "a/../../x", "/x", `${base}/x`, "a/./../x", "..", "a\\..\\..\\x"]) {
      await expect(store.createIfAbsent(key, bytes("evil"))).rejects.toBeInstanceOf(
        InvalidInputError,
      );
    }
    for (const key of ["..x", "x..", "...", "a/..b/..c"]) {
      expect(await store.createIfAbsent(key, bytes("ok"))).toBe("created");
    }

    await expect(stat(outside)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await readdir(base)).toEqual(["root"]);
    expect(await tree(root)).toEqual(["...", "..x", "a", "a/..b", "a/..b/..c", "x.."]);
  });

  it("refuses to create an object at a key that is a folder of other objects, instead of claiming it exists", async () => {
    await store.createIfAbsent("f/child", bytes("c"));

    await expect(store.createIfAbsent("f", bytes("parent"))).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    await expect(store.get("f")).rejects.toBeInstanceOf(ObjectNotFoundError);
    expect(await store.head("f")).toBeNull();
    await store.delete("f");
    expect(await keysOf(store)).toEqual(["f/child"]);
  });

  it("refuses to create an object below a key that is itself an object", async () => {
    await store.createIfAbsent("g", bytes("object"));

    await expect(store.createIfAbsent("g/below", bytes("x"))).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    expect(await keysOf(store)).toEqual(["g"]);
  });

  it("prunes folders left empty by a delete, but never the root", async () => {
    await store.createIfAbsent("p/q/r/s", bytes("1"));
    await store.createIfAbsent("p/other", bytes("2"));

    await store.delete("p/q/r/s");
    expect(await tree(root)).toEqual(["p", "p/other"]);

    await store.delete("p/other");
    expect(await tree(root)).toEqual([]);
    expect((await stat(root)).isDirectory()).toBe(true);
  });

  it("lets creates succeed while concurrent deletes prune the same folders", async () => {
    const rounds = 40;
    const outcomes = await Promise.all(
      Array.from({ length: rounds }, async (_, i) => {
        await store.createIfAbsent(`z/deep/dir/k${i}`, bytes(`${i}`));
        await store.delete(`z/deep/dir/k${i}`);
        return await store.createIfAbsent(`z/deep/dir/again${i}`, bytes(`${i}`));
      }),
    );

    expect(outcomes.every((o) => o === "created")).toBe(true);
    expect((await keysOf(store, "z/")).length).toBe(rounds);
  });

  it("copies a file body larger than memory-friendly chunks without changing a byte", async () => {
    const content = randomBytes(12 * 1024 * 1024 + 7);
    const filePath = path.join(base, "large.bin");
    await writeFile(filePath, content);

    expect(
      await store.createIfAbsent("l/large", { filePath, byteLength: content.byteLength }),
    ).toBe("created");

    expect(Buffer.from(await store.get("l/large", { start: 5_000_000, end: 5_000_100 }))).toEqual(
      content.subarray(5_000_000, 5_000_100),
    );
    expect(Buffer.from(await store.get("l/large")).equals(content)).toBe(true);
  });

  it("rejects a key whose segment is too long for the filesystem with InvalidInputError", async () => {
    await expect(store.createIfAbsent(`n/${"x".repeat(300)}`, bytes("x"))).rejects.toBeInstanceOf(
      InvalidInputError,
    );
  });
});

describe("openObjectStore", () => {
  it("opens a file store at the location's root and reports an empty key prefix", () => {
    const location = { kind: "file", root: "/tmp/pulpitum-archive", prefix: "" } as const;

    const store = openObjectStore(location);

    expect(store).toBeInstanceOf(FileObjectStore);
    expect((store as FileObjectStore).root).toBe("/tmp/pulpitum-archive");
    expect(archivePrefix(location)).toBe("");
  });

  it("opens an S3 store on the bucket and leaves the prefix to the keys", async () => {
    const location = {
      kind: "s3",
      bucket: "archive-bucket",
      prefix: "team/archive",
      forcePathStyle: true,
      endpoint: "http://127.0.0.1:1",
    } as const;

    const store = openObjectStore(location);

    expect(store).toBeInstanceOf(S3ObjectStore);
    expect((store as S3ObjectStore).bucket).toBe("archive-bucket");
    expect(archivePrefix(location)).toBe("team/archive");
    await store.close?.();
  });
});
