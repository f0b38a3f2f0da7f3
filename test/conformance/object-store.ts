/**
 * The object store contract, run against every adapter: the in-memory fake,
 * the filesystem store and S3 (moto). An adapter that passes can stand in for
 * any other under the archiver.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InvalidInputError, ObjectNotFoundError } from "../../src/errors.js";
import { listAll, type ObjectInfo, type ObjectStore } from "../../src/ports/object-store.js";

export interface OpenedStore {
  readonly store: ObjectStore;
  /** Remove everything the store holds and release it. */
  readonly cleanup: () => Promise<void>;
}

const encoder = new TextEncoder();
const text = (s: string) => encoder.encode(s);

async function collect(iterable: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of iterable) chunks.push(chunk);
  return new Uint8Array(Buffer.concat(chunks));
}

async function keysOf(store: ObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const object of listAll(store, prefix)) keys.push(object.key);
  return keys;
}

/** Bytes 0..255 repeated to `length`. */
function everyByteValue(length = 256 * 3 + 17): Uint8Array {
  return Uint8Array.from({ length }, (_, i) => i % 256);
}

export const BAD_KEYS: readonly string[] = [
  "../x",
  "a/../../x",
  "/abs",
  "a//b",
  "a/./b",
  "./a",
  "a/..",
  "a\0b",
  "",
  "a/",
  "a\\..\\b",
];

export function objectStoreConformance(name: string, open: () => Promise<OpenedStore>): void {
  describe(`object store conformance: ${name}`, () => {
    let store: ObjectStore;
    let cleanup: () => Promise<void>;
    let scratch: string;

    beforeEach(async () => {
      ({ store, cleanup } = await open());
      scratch = await mkdtemp(path.join(os.tmpdir(), "pulpitum-conformance-body-"));
    });

    afterEach(async () => {
      await cleanup();
      await rm(scratch, { recursive: true, force: true });
    });

    describe("replace", () => {
      it("creates an absent key and overwrites an existing one, after which create-if-absent finds it", async () => {
        await store.replace("t/catalog/e.txt", text("version one"));
        expect(await store.get("t/catalog/e.txt")).toEqual(text("version one"));

        await store.replace("t/catalog/e.txt", new Uint8Array(0));

        expect((await store.head("t/catalog/e.txt"))?.size).toBe(0);
        expect(await store.get("t/catalog/e.txt")).toEqual(new Uint8Array(0));
        expect(await store.createIfAbsent("t/catalog/e.txt", text("late"))).toBe("already-exists");
        expect(await store.get("t/catalog/e.txt")).toEqual(new Uint8Array(0));
      });

      it("leaves a reader the old bytes or the new, never a mix, under 16 concurrent replaces", async () => {
        const bodies = Array.from({ length: 16 }, (_, i) => text(`body ${i} `.repeat(i + 1)));
        await Promise.all(bodies.map((body) => store.replace("race/replaced", body)));
        const got = Buffer.from(await store.get("race/replaced"));
        expect(bodies.some((b) => got.equals(b))).toBe(true);
      });
    });

    describe("createIfAbsent", () => {
      it("creates an absent key, reports created, and stores exactly the body", async () => {
        const body = text("payload one");

        const result = await store.createIfAbsent("t/payloads/a.json", body);

        expect(result).toBe("created");
        expect(await store.get("t/payloads/a.json")).toEqual(body);
      });

      it("reports already-exists for an existing key and never overwrites its bytes", async () => {
        await store.createIfAbsent("t/k", text("first"));

        const second = await store.createIfAbsent("t/k", text("second, longer body"));
        const same = await store.createIfAbsent("t/k", text("first"));

        expect(second).toBe("already-exists");
        expect(same).toBe("already-exists");
        expect(await store.get("t/k")).toEqual(text("first"));
        expect((await store.head("t/k"))?.size).toBe(5);
      });

      it("lets exactly one of 32 concurrent creates of one key win, and stores the winner's bytes", async () => {
        const bodies = Array.from({ length: 32 }, (_, i) =>
          text(`body number ${i} `.repeat(i + 1)),
        );

        const results = await Promise.all(
          bodies.map((body) => store.createIfAbsent("race/key", body)),
        );

        const winners = results.flatMap((r, i) => (r === "created" ? [i] : []));
        expect(winners).toHaveLength(1);
        expect(results.filter((r) => r === "already-exists")).toHaveLength(31);
        expect(await store.get("race/key")).toEqual(bodies[winners[0]!]);
        expect(await keysOf(store, "race/")).toEqual(["race/key"]);
      });

      it("stores a file body byte for byte, as a bytes body would", async () => {
        const bytes = randomBytes(300_000);
        const filePath = path.join(scratch, "body.bin");
        await writeFile(filePath, bytes);

        const result = await store.createIfAbsent("f/body.bin", {
          filePath,
          byteLength: bytes.byteLength,
        });

        expect(result).toBe("created");
        const stored = await store.get("f/body.bin");
        expect(createHash("sha256").update(stored).digest("hex")).toBe(
          createHash("sha256").update(bytes).digest("hex"),
        );
        expect((await store.head("f/body.bin"))?.size).toBe(bytes.byteLength);
      });

      it("reports already-exists for a file body at an existing key without touching the object", async () => {
        await store.createIfAbsent("f/existing", text("original"));
        const filePath = path.join(scratch, "other.bin");
        await writeFile(filePath, "replacement bytes");

        const result = await store.createIfAbsent("f/existing", { filePath, byteLength: 17 });

        expect(result).toBe("already-exists");
        expect(await store.get("f/existing")).toEqual(text("original"));
      });

      it("rejects a file body whose declared length differs from the file and writes nothing", async () => {
        const filePath = path.join(scratch, "short.bin");
        await writeFile(filePath, "12345");

        await expect(
          store.createIfAbsent("f/lying", { filePath, byteLength: 6 }),
        ).rejects.toBeInstanceOf(InvalidInputError);
        expect(await store.head("f/lying")).toBeNull();
        expect(await keysOf(store, "")).toEqual([]);
      });

      it("stores and returns a 0-byte object", async () => {
        expect(await store.createIfAbsent("empty/object", new Uint8Array(0))).toBe("created");

        expect(await store.get("empty/object")).toEqual(new Uint8Array(0));
        expect(await store.get("empty/object", { start: 0, end: 10 })).toEqual(new Uint8Array(0));
        expect(await collect(await store.getStream("empty/object"))).toEqual(new Uint8Array(0));
        expect((await store.head("empty/object"))?.size).toBe(0);
        const page = await store.list("empty/");
        expect(page.objects.map((o) => [o.key, o.size])).toEqual([["empty/object", 0]]);
        expect(await store.createIfAbsent("empty/object", text("x"))).toBe("already-exists");
      });

      it("round-trips binary content holding every byte value", async () => {
        const bytes = everyByteValue();

        await store.createIfAbsent("bin/all-bytes", bytes);

        expect(await store.get("bin/all-bytes")).toEqual(bytes);
        expect(await collect(await store.getStream("bin/all-bytes"))).toEqual(bytes);
        expect(await store.get("bin/all-bytes", { start: 250, end: 262 })).toEqual(
          bytes.slice(250, 262),
        );
      });

      it("keeps a key made of the archive's real key characters intact", async () => {
        const key = "archive/v4/orders/AAEC_-8/year:2024/payloads/" + "ab".repeat(32) + ".parquet";

        await store.createIfAbsent(key, text("p"));

        expect(await keysOf(store, "archive/")).toEqual([key]);
        expect(await store.get(key)).toEqual(text("p"));
      });
    });

    describe("get", () => {
      const bytes = everyByteValue(1000);

      beforeEach(async () => {
        await store.createIfAbsent("r/object", bytes);
      });

      it("returns the whole object when no range is given", async () => {
        expect(await store.get("r/object")).toEqual(bytes);
      });

      it("returns exactly the first byte for the range [0, 1)", async () => {
        expect(await store.get("r/object", { start: 0, end: 1 })).toEqual(bytes.slice(0, 1));
      });

      it("returns exactly the middle bytes of a range inside the object", async () => {
        expect(await store.get("r/object", { start: 400, end: 613 })).toEqual(
          bytes.slice(400, 613),
        );
      });

      it("returns exactly the last byte for the range [size - 1, size)", async () => {
        expect(await store.get("r/object", { start: 999, end: 1000 })).toEqual(bytes.slice(999));
      });

      it("clips a range that runs past the end to the object's end", async () => {
        expect(await store.get("r/object", { start: 990, end: 5000 })).toEqual(bytes.slice(990));
      });

      it("returns the whole object for a range that covers it exactly", async () => {
        expect(await store.get("r/object", { start: 0, end: 1000 })).toEqual(bytes);
      });

      it("returns no bytes for a range that starts at or past the end", async () => {
        expect(await store.get("r/object", { start: 1000, end: 1010 })).toEqual(new Uint8Array(0));
        expect(await store.get("r/object", { start: 5000, end: 6000 })).toEqual(new Uint8Array(0));
      });

      it("returns no bytes for an empty range", async () => {
        expect(await store.get("r/object", { start: 10, end: 10 })).toEqual(new Uint8Array(0));
      });

      it("rejects a range that ends before it starts or has a negative offset", async () => {
        await expect(store.get("r/object", { start: 10, end: 5 })).rejects.toBeInstanceOf(
          InvalidInputError,
        );
        await expect(store.get("r/object", { start: -1, end: 5 })).rejects.toBeInstanceOf(
          InvalidInputError,
        );
        await expect(store.get("r/object", { start: 0.5, end: 5 })).rejects.toBeInstanceOf(
          InvalidInputError,
        );
      });

      it("throws ObjectNotFoundError for an absent key, with or without a range", async () => {
        await expect(store.get("r/absent")).rejects.toBeInstanceOf(ObjectNotFoundError);
        await expect(store.get("r/absent", { start: 0, end: 1 })).rejects.toBeInstanceOf(
          ObjectNotFoundError,
        );
        await expect(store.get("r/absent", { start: 3, end: 3 })).rejects.toBeInstanceOf(
          ObjectNotFoundError,
        );
        await expect(store.get("r/object/below")).rejects.toBeInstanceOf(ObjectNotFoundError);
        await expect(store.get("r")).rejects.toBeInstanceOf(ObjectNotFoundError);
      });

      it("names the missing key in ObjectNotFoundError", async () => {
        const error = await store.get("r/absent").catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ObjectNotFoundError);
        expect((error as ObjectNotFoundError).objectKey).toBe("r/absent");
      });
    });

    describe("getStream", () => {
      it("yields the object's bytes in order, in more than one chunk for a large object", async () => {
        const bytes = randomBytes(1024 * 1024 + 123);
        await store.createIfAbsent("s/large", bytes);

        const chunks: Uint8Array[] = [];
        for await (const chunk of await store.getStream("s/large")) chunks.push(chunk);

        expect(chunks.length).toBeGreaterThan(1);
        expect(chunks.every((c) => c instanceof Uint8Array)).toBe(true);
        expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
      });

      it("throws ObjectNotFoundError for an absent key before anything is iterated", async () => {
        await expect(store.getStream("s/absent")).rejects.toBeInstanceOf(ObjectNotFoundError);
      });
    });

    describe("head", () => {
      it("returns the key, size and modification time of a present object", async () => {
        const before = Date.now();
        await store.createIfAbsent("h/present", text("12345678"));

        const info = await store.head("h/present");

        expect(info).not.toBeNull();
        expect(info!.key).toBe("h/present");
        expect(info!.size).toBe(8);
        expect(info!.lastModified).toBeInstanceOf(Date);
        // Allow for clock skew and whole-second timestamps between client and server.
        expect(Math.abs(info!.lastModified.getTime() - before)).toBeLessThan(60_000);
      });

      it("returns null for an absent key and for a key that is only a prefix of others", async () => {
        await store.createIfAbsent("h/dir/child", text("x"));

        expect(await store.head("h/absent")).toBeNull();
        expect(await store.head("h/dir")).toBeNull();
        expect(await store.head("h/dir/child/below")).toBeNull();
      });

      it("with checksum, reports the stored bytes' SHA-256 or nothing, never another; without, nothing", async () => {
        const body = everyByteValue();
        await store.createIfAbsent("h/sum", body);
        await store.replace("h/replaced", text("first"));
        await store.replace("h/replaced", text("other"));
        const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

        for (const [key, bytes] of [
          ["h/sum", body],
          ["h/replaced", text("other")],
        ] as const) {
          const info = await store.head(key, { checksum: true });
          expect(info).toMatchObject({ key, size: bytes.byteLength });
          if (info!.sha256 !== undefined) expect(info!.sha256).toBe(sha(bytes));
          expect((await store.head(key))!.sha256).toBeUndefined();
        }
        expect(await store.head("h/absent", { checksum: true })).toBeNull();
      });
    });

    describe("list", () => {
      // Byte order puts '-' (0x2d) before '/' (0x2f) before '0' (0x30), so a
      // store that walks directories must not list "p/a/…" before "p/a-c".
      // No key is also a folder of others: the filesystem store cannot hold both.
      const keys = ["p/a-c", "p/a/b", "p/a/c/d", "p/a0", "p/b", "p/bz/x/y/z", "q/1"];

      beforeEach(async () => {
        for (const [i, key] of [...keys].reverse().entries()) {
          await store.createIfAbsent(key, text("v".repeat(i + 1)));
        }
      });

      it("pages with maxKeys 2 through every key exactly once, in byte order", async () => {
        const seen: string[] = [];
        const pageSizes: number[] = [];
        let continuationToken: string | undefined;
        do {
          const page = await store.list("", { continuationToken, maxKeys: 2 });
          pageSizes.push(page.objects.length);
          seen.push(...page.objects.map((o) => o.key));
          continuationToken = page.continuationToken;
        } while (continuationToken !== undefined);

        expect(seen).toEqual(keys);
        expect(pageSizes).toEqual([2, 2, 2, 1]);
      });

      it("returns every key on one page with no continuation token when they fit", async () => {
        const page = await store.list("");

        expect(page.objects.map((o) => o.key)).toEqual(keys);
        expect(page.continuationToken).toBeUndefined();
      });

      it("reports each listed object's size", async () => {
        const page = await store.list("p/b");

        const sizes = Object.fromEntries(page.objects.map((o: ObjectInfo) => [o.key, o.size]));
        expect(sizes).toEqual({ "p/b": 3, "p/bz/x/y/z": 2 });
      });

      it("filters by a prefix that ends in the middle of a segment", async () => {
        expect(await keysOf(store, "p/a")).toEqual(["p/a-c", "p/a/b", "p/a/c/d", "p/a0"]);
        expect(await keysOf(store, "p/a/c")).toEqual(["p/a/c/d"]);
        expect(await keysOf(store, "q")).toEqual(["q/1"]);
      });

      it("filters by a prefix that ends with a separator, including nested directories", async () => {
        expect(await keysOf(store, "p/a/")).toEqual(["p/a/b", "p/a/c/d"]);
        expect(await keysOf(store, "p/bz/")).toEqual(["p/bz/x/y/z"]);
        expect(await keysOf(store, "p/bz/x/y/")).toEqual(["p/bz/x/y/z"]);
        expect(await keysOf(store, "p/b/")).toEqual([]);
      });

      it("treats a prefix equal to a whole key as matching that key and every longer key", async () => {
        expect(await keysOf(store, "p/b")).toEqual(["p/b", "p/bz/x/y/z"]);
        expect(await keysOf(store, "p/bz/x/y/z")).toEqual(["p/bz/x/y/z"]);
      });

      it("returns an empty last page for a prefix nothing starts with", async () => {
        const page = await store.list("nothing/here/");

        expect(page.objects).toEqual([]);
        expect(page.continuationToken).toBeUndefined();
        expect(await keysOf(store, "p/c")).toEqual([]);
      });

      it("pages within a prefix with maxKeys 1 without leaking keys outside it", async () => {
        const seen: string[] = [];
        let continuationToken: string | undefined;
        do {
          const page = await store.list("p/a", { continuationToken, maxKeys: 1 });
          expect(page.objects.length).toBeLessThanOrEqual(1);
          seen.push(...page.objects.map((o) => o.key));
          continuationToken = page.continuationToken;
        } while (continuationToken !== undefined);

        expect(seen).toEqual(["p/a-c", "p/a/b", "p/a/c/d", "p/a0"]);
      });

      it("starts after a given key, whether or not it still exists, and pages on from there", async () => {
        const after = async (startAfter: string, prefix = "") => {
          const seen: string[] = [];
          let continuationToken: string | undefined;
          do {
            const page = await store.list(prefix, { continuationToken, startAfter, maxKeys: 1 });
            seen.push(...page.objects.map((o) => o.key));
            continuationToken = page.continuationToken;
          } while (continuationToken !== undefined);
          return seen;
        };
        expect(await after("p/a/b")).toEqual(["p/a/c/d", "p/a0", "p/b", "p/bz/x/y/z", "q/1"]);
        // A key deleted since (or never written) still marks the position.
        expect(await after("p/a/bb")).toEqual(["p/a/c/d", "p/a0", "p/b", "p/bz/x/y/z", "q/1"]);
        expect(await after("p/a", "p/")).toEqual([
          "p/a-c",
          "p/a/b",
          "p/a/c/d",
          "p/a0",
          "p/b",
          "p/bz/x/y/z",
        ]);
        expect(await after("p/b", "p/")).toEqual(["p/bz/x/y/z"]);
        expect(await after("q/1")).toEqual([]);
      });

      it("rejects a prefix that could escape the store", async () => {
        await expect(store.list("../")).rejects.toBeInstanceOf(InvalidInputError);
        await expect(store.list("/abs")).rejects.toBeInstanceOf(InvalidInputError);
        await expect(store.list("a//")).rejects.toBeInstanceOf(InvalidInputError);
      });
    });

    describe("uri", () => {
      it("names each key by one absolute URI that ends with the key, whether or not the object exists", async () => {
        const keys = [
          "v4/chat/Yy0x/month:2025-03/payloads/a.parquet",
          "catalog/json/table_id=chat/b.txt",
        ];
        await store.createIfAbsent(keys[0]!, text("x"));

        const uris = await Promise.all(keys.map((k) => store.uri(k)));

        expect(new Set(uris).size).toBe(2);
        for (const [i, uri] of uris.entries()) {
          expect(uri).toMatch(/^[a-z][a-z0-9+.-]*:\/\//);
          expect(decodeURIComponent(uri).endsWith(`/${keys[i]}`)).toBe(true);
          expect(await store.uri(keys[i]!)).toBe(uri);
        }
      });

      it("refuses a key the store would refuse", async () => {
        await expect(store.uri("a/../b")).rejects.toBeInstanceOf(InvalidInputError);
      });
    });

    describe("delete", () => {
      it("removes an object so get throws ObjectNotFoundError, head is null and list omits it", async () => {
        await store.createIfAbsent("d/gone", text("bye"));
        await store.createIfAbsent("d/kept", text("stay"));

        await store.delete("d/gone");

        await expect(store.get("d/gone")).rejects.toBeInstanceOf(ObjectNotFoundError);
        await expect(store.getStream("d/gone")).rejects.toBeInstanceOf(ObjectNotFoundError);
        expect(await store.head("d/gone")).toBeNull();
        expect(await keysOf(store, "d/")).toEqual(["d/kept"]);
        expect(await store.get("d/kept")).toEqual(text("stay"));
      });

      it("succeeds for an absent key, twice", async () => {
        await store.delete("d/never-existed");
        await store.delete("d/never-existed");
        await store.delete("d/deep/never/existed");
      });

      it("frees the key so a later create succeeds with new bytes", async () => {
        await store.createIfAbsent("d/again", text("old"));
        await store.delete("d/again");

        expect(await store.createIfAbsent("d/again", text("new"))).toBe("created");
        expect(await store.get("d/again")).toEqual(text("new"));
      });

      it("leaves sibling and nested objects alone when the last object of a folder goes", async () => {
        await store.createIfAbsent("d/x/y/only", text("1"));
        await store.createIfAbsent("d/x/other", text("2"));

        await store.delete("d/x/y/only");

        expect(await keysOf(store, "d/")).toEqual(["d/x/other"]);
        expect(await store.createIfAbsent("d/x/y/only", text("3"))).toBe("created");
      });
    });

    describe("keys", () => {
      it.each(BAD_KEYS.map((key) => [JSON.stringify(key), key]))(
        "rejects the key %s with InvalidInputError in every operation and writes nothing",
        async (_label, key) => {
          await expect(store.createIfAbsent(key, text("evil"))).rejects.toBeInstanceOf(
            InvalidInputError,
          );
          await expect(store.get(key)).rejects.toBeInstanceOf(InvalidInputError);
          await expect(store.getStream(key)).rejects.toBeInstanceOf(InvalidInputError);
          await expect(store.head(key)).rejects.toBeInstanceOf(InvalidInputError);
          await expect(store.delete(key)).rejects.toBeInstanceOf(InvalidInputError);

          expect(await keysOf(store, "")).toEqual([]);
        },
      );

      it("rejects a key longer than 1024 bytes", async () => {
        const key = "k/" + "é".repeat(512);

        await expect(store.createIfAbsent(key, text("x"))).rejects.toBeInstanceOf(
          InvalidInputError,
        );
        expect(await keysOf(store, "")).toEqual([]);
      });

      it("accepts segments that merely contain dots", async () => {
        for (const key of ["dots/..a", "dots/a..", "dots/...", "dots/.hidden", "dots/a.b.c"]) {
          expect(await store.createIfAbsent(key, text(key))).toBe("created");
        }

        expect(await keysOf(store, "dots/")).toEqual([
          "dots/...",
          "dots/..a",
          "dots/.hidden",
          "dots/a..",
          "dots/a.b.c",
        ]);
        expect(await store.get("dots/...")).toEqual(text("dots/..."));
      });
    });
  });
}
