/**
 * SHA-256 of a byte stream, on this thread or on the check thread (see
 * payload-check.ts, which owns the thread): a payload's bytes as they are
 * written and as they are read back are hashed beside the work that
 * produces them.
 *
 * Invariant: the digest is of exactly the bytes given, in the order given.
 * Bytes go to the thread over one port, which keeps their order; bytes the
 * caller hands over move there (their ArrayBuffer is then empty here),
 * others are copied first. A hash whose thread was lost gives no digest,
 * and the caller hashes its source again here.
 */
import { createHash } from "node:crypto";

/** The SHA-256 (hex) and length of the bytes a {@link ByteHash} was given. */
export interface ByteDigest {
  readonly sha256: string;
  readonly byteLength: number;
}

/**
 * SHA-256 of a byte stream, taken on the check thread when it runs, so the
 * hashing of a payload (as it is written, and as it is read back) runs
 * beside the work that produces the bytes.
 */
export interface ByteHash {
  /**
   * Hash `bytes` next. With `handedOver`, the caller gives up the bytes'
   * whole ArrayBuffer (it may move to the thread, and is then empty here);
   * otherwise they are copied. Resolves at once unless too many bytes wait
   * to be hashed.
   */
  update(bytes: Uint8Array, handedOver: boolean): Promise<void> | undefined;
  /** The digest of everything given; undefined when the thread hashing it was lost. */
  digest(): Promise<ByteDigest | undefined>;
  /** Drop the hash unfinished (the stream failed). */
  cancel(): void;
}

export class LocalByteHash implements ByteHash {
  readonly #hash = createHash("sha256");
  #byteLength = 0;

  update(bytes: Uint8Array): undefined {
    this.#hash.update(bytes);
    this.#byteLength += bytes.byteLength;
    return undefined;
  }

  digest(): Promise<ByteDigest> {
    return Promise.resolve({ sha256: this.#hash.digest("hex"), byteLength: this.#byteLength });
  }

  cancel(): void {}
}

/** Bytes posted to the thread and not yet hashed there, past which an update waits. */
const HASH_WINDOW_BYTES = 32 * 1024 * 1024;
/** Copied bytes go to the thread in messages of this size. */
const HASH_MESSAGE_BYTES = 1024 * 1024;

/** How a {@link ThreadByteHash} reaches its thread. */
export interface HashChannel {
  /** Post bytes to be hashed; their ArrayBuffer moves to the thread. */
  send(bytes: Uint8Array): void;
  lost(): boolean;
  digest(): Promise<ByteDigest | undefined>;
  cancel(): void;
}

/**
 * A hash taken on the check thread. Copied bytes are gathered into messages
 * of {@link HASH_MESSAGE_BYTES} (an S3 stream's 16 KiB chunks would each cost
 * a message); bytes handed over move as they are. An update waits while more
 * than {@link HASH_WINDOW_BYTES} are unhashed, until half of them are.
 */
export class ThreadByteHash implements ByteHash {
  #unhashed = 0;
  #drained: { promise: Promise<void>; resolve: () => void } | undefined;
  #gathering: Buffer | undefined;
  #gathered = 0;

  constructor(private readonly channel: HashChannel) {}

  /** The thread hashed `bytes` more (Infinity once it is lost). */
  hashed(bytes: number): void {
    this.#unhashed -= bytes;
    const drained = this.#drained;
    if (drained === undefined || this.#unhashed > HASH_WINDOW_BYTES / 2) return;
    this.#drained = undefined;
    drained.resolve();
  }

  update(bytes: Uint8Array, handedOver: boolean): Promise<void> | undefined {
    if (this.channel.lost()) return undefined;
    if (handedOver) {
      this.#sendGathered();
      this.#send(bytes);
      return this.#wait();
    }
    for (let at = 0; at < bytes.byteLength;) {
      const into = (this.#gathering ??= Buffer.allocUnsafeSlow(HASH_MESSAGE_BYTES));
      const take = Math.min(HASH_MESSAGE_BYTES - this.#gathered, bytes.byteLength - at);
      into.set(bytes.subarray(at, at + take), this.#gathered);
      this.#gathered += take;
      at += take;
      if (this.#gathered === HASH_MESSAGE_BYTES) this.#sendGathered();
    }
    return this.#wait();
  }

  async digest(): Promise<ByteDigest | undefined> {
    if (!this.channel.lost()) this.#sendGathered();
    return await this.channel.digest();
  }

  cancel(): void {
    this.channel.cancel();
  }

  #sendGathered(): void {
    const gathering = this.#gathering;
    if (gathering === undefined || this.#gathered === 0) return;
    this.#send(gathering.subarray(0, this.#gathered));
    this.#gathering = undefined;
    this.#gathered = 0;
  }

  #send(bytes: Uint8Array): void {
    this.#unhashed += bytes.byteLength;
    this.channel.send(bytes);
  }

  #wait(): Promise<void> | undefined {
    if (this.#unhashed <= HASH_WINDOW_BYTES) return undefined;
    if (this.#drained === undefined) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.#drained = { promise, resolve };
    }
    return this.#drained.promise;
  }
}
