/**
 * Checking a payload file while it is being written, on a worker thread,
 * so that the export's verification runs on the second core beside the
 * encoding instead of after it on the first.
 *
 * Invariant: a check's result is what {@link inspectPayload} gives for the
 * finished file (row count and row digest, or an ArchiveIntegrityError).
 * Announced Parquet row groups only let that work start early (see
 * parquet/announced-groups.ts, which falls back to the whole file when its
 * footer names anything else). Where a check runs changes when the work is
 * done, never what is accepted: on the worker thread when its module is
 * beside this one (`payload-check-worker` with this module's extension: the
 * sources under tsx, dist/ after tsc, `payload-check-worker.mjs` beside a
 * Lambda bundle's index.mjs), otherwise on this thread; and a check whose
 * thread failed or exited is done again here, on the whole file.
 *
 * The check also takes the file's SHA-256, its content address, reading the
 * file as it grows (`written`) and its last bytes at `finish`: the export's
 * main thread, which encodes, no longer hashes. What is uploaded is this
 * file, and the read-back of the stored object must hash the same.
 *
 * The thread: one per process, started on first use and shared by every
 * check (a worker Lambda running several exports sends them all to it),
 * referenced only while a check waits for its result, so an idle thread
 * never keeps the process alive. Messages on its port keep their order, so
 * a check sees its announcements before its finish.
 */
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isMainThread, Worker, type MessagePort } from "node:worker_threads";
import { ArchiveIntegrityError } from "../errors.js";
import type { ArchiveFormat } from "../domain/table.js";
import { readFully } from "../file-read.js";
import { fileByteSource } from "./byte-sources.js";
import { AnnouncedGroupsCheck, type AnnouncedRowGroup } from "./parquet/announced-groups.js";
import {
  decodeFailure,
  inspectPayload,
  type PayloadContent,
  type PayloadExpectations,
} from "./payload-reader.js";

export interface PayloadCheckTarget {
  /** The file being written; failures name it. */
  readonly filePath: string;
  readonly format: ArchiveFormat;
  readonly expected: PayloadExpectations;
}

/** Where checks run: on the shared worker thread (when it can start), or on this thread. */
export type CheckPlace = "thread" | "here";

export interface PayloadCheck {
  /** A Parquet row group's bytes are in the file: check it now. */
  announce(group: AnnouncedRowGroup): void;
  /** The file holds its first `byteLength` bytes: hash them now. */
  written(byteLength: number): void;
  /** The file is complete at `byteLength` bytes: its SHA-256, and its content once every check passed. */
  finish(byteLength: number): FinishedCheck;
  /** The write failed: drop the check (the file may be removed). */
  cancel(): void;
}

export interface FinishedCheck {
  /** The file's SHA-256 (hex), from its bytes as they lie in the file. */
  readonly sha256: Promise<string>;
  readonly content: Promise<PayloadContent>;
}

/** Start checking the file `target` names while it is written. */
export function startPayloadCheck(
  target: PayloadCheckTarget,
  place: CheckPlace = "thread",
): PayloadCheck {
  const thread = place === "thread" ? sharedThread() : undefined;
  return thread?.start(target) ?? new LocalPayloadCheck(target);
}

/** Where a check started now would run (the bench reports it). */
export function payloadCheckPlace(): CheckPlace {
  return sharedThread() === undefined ? "here" : "thread";
}

/** A check on this thread: announced groups are checked in order as they come. */
class LocalPayloadCheck implements PayloadCheck {
  readonly #groups: AnnouncedGroupsCheck | undefined;
  readonly #hash: FileHash;
  #handle: Promise<FileHandle> | undefined;
  #chain: Promise<void> = Promise.resolve();
  /** The hashing, apart from the group checks so neither waits for the other. */
  #hashing: Promise<void> = Promise.resolve();
  #failure: { error: unknown } | undefined;
  #cancelled = false;

  constructor(private readonly target: PayloadCheckTarget) {
    this.#hash = new FileHash(target.filePath, (at, into) => this.#readAt(at, into));
    this.#groups =
      target.format === "parquet"
        ? new AnnouncedGroupsCheck(
            target.filePath,
            (start, end, into) => this.#read(start, end, into),
            target.expected,
          )
        : undefined;
  }

  announce(group: AnnouncedRowGroup): void {
    const groups = this.#groups;
    if (groups === undefined) return;
    this.#chain = this.#chain.then(async () => {
      if (this.#failure !== undefined || this.#cancelled) return;
      try {
        await groups.add(group);
      } catch (error) {
        this.#failure = { error };
      }
    });
  }

  written(byteLength: number): void {
    this.#hashing = this.#hashing.then(async () => {
      if (this.#failure !== undefined || this.#cancelled) return;
      try {
        await this.#hash.upTo(byteLength);
      } catch (error) {
        this.#failure = { error };
      }
    });
  }

  finish(byteLength: number): FinishedCheck {
    const sha256 = this.#hashing.then(async () => {
      if (this.#failure !== undefined) throw this.#failure.error;
      await this.#hash.upTo(byteLength);
      return this.#hash.digest();
    });
    sha256.catch(() => undefined);
    return { sha256, content: this.#content(byteLength, sha256) };
  }

  async #content(byteLength: number, hashed: Promise<string>): Promise<PayloadContent> {
    await this.#chain;
    // The handle is shared with the hashing: released once both are done.
    await hashed.catch(() => undefined);
    const { filePath, format, expected } = this.target;
    try {
      if (this.#failure !== undefined) throw decodeFailure(filePath, format, this.#failure.error);
      const source = await fileByteSource(filePath);
      try {
        if (source.byteLength !== byteLength) {
          throw new ArchiveIntegrityError(
            filePath,
            `the file holds ${source.byteLength} bytes, ${byteLength} were written`,
          );
        }
        // Streamed groups stand only if the footer names exactly them; else the whole file.
        const content = await this.#groups?.finish(source);
        return content ?? (await inspectPayload(source, format, expected));
      } catch (error) {
        throw decodeFailure(filePath, format, error);
      } finally {
        await source.close();
      }
    } finally {
      await this.#release();
    }
  }

  cancel(): void {
    this.#cancelled = true;
    const both = Promise.all([this.#chain, this.#hashing]);
    this.#chain = both.then(() => this.#release());
  }

  async #read(start: number, end: number, into: Buffer): Promise<Uint8Array> {
    const range = into.subarray(0, Math.max(0, end - start));
    return range.subarray(0, await this.#readAt(start, range));
  }

  async #readAt(position: number, into: Uint8Array): Promise<number> {
    this.#handle ??= open(this.target.filePath, "r");
    return await readFully(await this.#handle, into, position);
  }

  async #release(): Promise<void> {
    this.#groups?.close();
    const handle = this.#handle;
    this.#handle = undefined;
    await (await handle?.catch(() => undefined))?.close();
  }
}

/**
 * SHA-256 of a file read front to back as it grows, a MiB at a time into
 * one buffer. Asked to hash past the file's end, it fails naming the file.
 */
class FileHash {
  static readonly #READ_BYTES = 1 << 20;
  readonly #hash = createHash("sha256");
  #buffer: Buffer | undefined;
  #hashed = 0;

  constructor(
    private readonly name: string,
    private readonly readAt: (position: number, into: Uint8Array) => Promise<number>,
  ) {}

  /** Hash the file's bytes up to `end` (those before were hashed already). */
  async upTo(end: number): Promise<void> {
    while (this.#hashed < end) {
      this.#buffer ??= Buffer.allocUnsafe(FileHash.#READ_BYTES);
      const into = this.#buffer.subarray(0, Math.min(FileHash.#READ_BYTES, end - this.#hashed));
      const read = await this.readAt(this.#hashed, into);
      if (read !== into.byteLength) {
        throw new ArchiveIntegrityError(
          this.name,
          `the file ends at ${this.#hashed + read} bytes, ${end} were written`,
        );
      }
      this.#hash.update(into);
      this.#hashed += read;
    }
  }

  digest(): string {
    return this.#hash.digest("hex");
  }
}

type Request =
  | { readonly kind: "start"; readonly id: number; readonly target: PayloadCheckTarget }
  | { readonly kind: "announce"; readonly id: number; readonly group: AnnouncedRowGroup }
  | { readonly kind: "written"; readonly id: number; readonly byteLength: number }
  | { readonly kind: "finish"; readonly id: number; readonly byteLength: number }
  | { readonly kind: "cancel"; readonly id: number }
  /** End the thread from inside, between two messages (see {@link CheckThread.stop}). */
  | { readonly kind: "exit" };

/** A failure sent back over the port: an integrity verdict, or any other error. */
type Failure =
  | { readonly integrity: true; readonly objectKey: string; readonly problem: string }
  | {
      readonly integrity: false;
      readonly name: string;
      readonly message: string;
      /** Node's error code (ENOSPC, say): how the failure is classified (domain/failures.ts). */
      readonly code?: string;
    };

/** A finish is answered twice: the SHA-256 (or why not), then the content (or why not). */
type Reply =
  | { readonly id: number; readonly sha256: string }
  | { readonly id: number; readonly content: PayloadContent }
  | { readonly id: number; readonly part: "sha256" | "content"; readonly failure: Failure };

/** The worker thread's side: run each check it is sent, on that thread. */
export function serveChecks(port: MessagePort): void {
  const checks = new Map<number, LocalPayloadCheck>();
  port.on("message", (request: Request) => {
    switch (request.kind) {
      case "exit":
        // Only ever sent to the check thread, where this ends the thread alone.
        if (!isMainThread) process.exit(1);
        return;
      case "start":
        checks.set(request.id, new LocalPayloadCheck(request.target));
        return;
      case "announce":
        checks.get(request.id)?.announce(request.group);
        return;
      case "written":
        checks.get(request.id)?.written(request.byteLength);
        return;
      case "cancel":
        checks.get(request.id)?.cancel();
        checks.delete(request.id);
        return;
      case "finish": {
        const check = checks.get(request.id);
        checks.delete(request.id);
        const reply = (r: Reply) => port.postMessage(r);
        const id = request.id;
        if (check === undefined) {
          const message = `check ${id} was never started on this thread`;
          const failure: Failure = { integrity: false, name: "Error", message };
          reply({ id, part: "sha256", failure });
          reply({ id, part: "content", failure });
          return;
        }
        const finished = check.finish(request.byteLength);
        finished.sha256.then(
          (sha256) => reply({ id, sha256 }),
          (error: unknown) => reply({ id, part: "sha256", failure: failureOf(error) }),
        );
        finished.content.then(
          (content) => reply({ id, content }),
          (error: unknown) => reply({ id, part: "content", failure: failureOf(error) }),
        );
      }
    }
  });
}

function failureOf(error: unknown): Failure {
  if (error instanceof ArchiveIntegrityError)
    return { integrity: true, objectKey: error.objectKey, problem: error.problem };
  const e = error instanceof Error ? error : new Error(String(error));
  const code = (e as { code?: unknown }).code;
  return {
    integrity: false,
    name: e.name,
    message: e.message,
    ...(typeof code === "string" ? { code } : {}),
  };
}

function errorOf(failure: Failure): Error {
  if (failure.integrity) return new ArchiveIntegrityError(failure.objectKey, failure.problem);
  const error = new Error(failure.message);
  error.name = failure.name;
  return failure.code === undefined ? error : Object.assign(error, { code: failure.code });
}

/** The thread died: its checks are done again on this thread. */
class ThreadLost extends Error {}

class CheckThread {
  readonly #worker: Worker;
  /** Per finished check, what hears its replies (two each) or the thread's loss. */
  readonly #waiting = new Map<number, (reply: Reply | ThreadLost) => void>();
  #nextId = 0;
  /** Why the thread is gone, once it is: nothing posted to it is answered. */
  #lost: string | undefined;

  constructor(entry: WorkerEntry) {
    this.#worker = new Worker(entry.url, { execArgv: entry.execArgv });
    this.#worker.unref();
    this.#worker.on("message", (reply: Reply) => this.#waiting.get(reply.id)?.(reply));
    const lost = (why: string) => {
      this.#lost ??= why;
      if (thread === this) thread = undefined;
      for (const settle of [...this.#waiting.values()]) settle(new ThreadLost(why));
      this.#waiting.clear();
    };
    this.#worker.on("error", (error) => lost(error.message));
    this.#worker.on("exit", (code) => lost(`exited with code ${code}`));
  }

  start(target: PayloadCheckTarget): PayloadCheck {
    const id = this.#nextId++;
    const post = (request: Request) => this.#worker.postMessage(request);
    post({ kind: "start", id, target });
    return {
      announce: (group) => post({ kind: "announce", id, group }),
      written: (byteLength) => post({ kind: "written", id, byteLength }),
      cancel: () => post({ kind: "cancel", id }),
      finish: (byteLength) => this.#finish(id, target, byteLength, post),
    };
  }

  #finish(
    id: number,
    target: PayloadCheckTarget,
    byteLength: number,
    post: (request: Request) => void,
  ): FinishedCheck {
    const sha256 = settlable<string>();
    const content = settlable<PayloadContent>();
    // A lost thread's answers come from this thread instead, on the whole file.
    let local: FinishedCheck | undefined;
    const here = () => (local ??= new LocalPayloadCheck(target).finish(byteLength));
    const done = () => {
      this.#waiting.delete(id);
      if (this.#waiting.size === 0) this.#worker.unref();
    };
    const hear = (reply: Reply | ThreadLost) => {
      if (reply instanceof ThreadLost) {
        done();
        sha256.settle(here().sha256);
        content.settle(here().content);
      } else if ("sha256" in reply) {
        sha256.settle(Promise.resolve(reply.sha256));
      } else if ("content" in reply) {
        done();
        content.settle(Promise.resolve(reply.content));
      } else {
        const failed = Promise.reject(errorOf(reply.failure));
        failed.catch(() => undefined);
        if (reply.part === "sha256") sha256.settle(failed);
        else {
          done();
          content.settle(failed);
        }
      }
    };
    if (this.#lost !== undefined) hear(new ThreadLost(this.#lost));
    else {
      this.#waiting.set(id, hear);
      this.#worker.ref();
      post({ kind: "finish", id, byteLength });
    }
    sha256.promise.catch(() => undefined);
    return { sha256: sha256.promise, content: content.promise };
  }

  /**
   * End the thread; checks waiting on it are done again on the calling
   * thread. The thread ends itself between two messages: Worker.terminate()
   * can stop it inside a Zstandard stream's constructor, and Node 22 then
   * aborts the whole process as it frees the half-made stream
   * ("close before init"). A thread that does not end within a few seconds
   * is terminated.
   */
  async stop(): Promise<void> {
    if (this.#lost !== undefined) return;
    const exited = new Promise<void>((resolve) => this.#worker.once("exit", () => resolve()));
    this.#worker.postMessage({ kind: "exit" } satisfies Request);
    const late = setTimeout(() => void this.#worker.terminate(), STOP_GRACE_MS);
    await exited;
    clearTimeout(late);
  }
}

/** How long a check thread asked to end may take before it is terminated. */
const STOP_GRACE_MS = 5_000;

/** A promise settled once, later, by another promise (further settles are ignored). */
function settlable<T>(): { promise: Promise<T>; settle(by: Promise<T>): void } {
  let settle!: (by: Promise<T>) => void;
  let settled = false;
  const promise = new Promise<T>((resolve) => {
    settle = (by) => {
      if (settled) return;
      settled = true;
      resolve(by);
    };
  });
  return { promise, settle };
}

interface WorkerEntry {
  readonly url: URL;
  readonly execArgv?: string[];
}

let thread: CheckThread | undefined;
let entry: WorkerEntry | null | undefined;

function sharedThread(): CheckThread | undefined {
  if (thread !== undefined) return thread;
  entry ??= workerEntry();
  if (entry === null) return undefined;
  try {
    thread = new CheckThread(entry);
  } catch {
    entry = null;
  }
  return thread;
}

/**
 * Stop the shared thread, as a crash would: checks waiting on it are done
 * again on this thread, and the next check starts a new one.
 */
export async function stopCheckThread(): Promise<void> {
  const stopping = thread;
  thread = undefined;
  await stopping?.stop();
}

/** The worker's module beside this one, with what it needs to load; null when there is none. */
function workerEntry(): WorkerEntry | null {
  const here = fileURLToPath(import.meta.url);
  const extension = path.extname(here);
  const file = path.join(path.dirname(here), `payload-check-worker${extension}`);
  if (!existsSync(file)) return null;
  const url = pathToFileURL(file);
  if (extension !== ".ts") return { url };
  // Sources run under tsx (a development dependency), and so must the thread.
  let tsx: string;
  try {
    tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
  } catch {
    return null;
  }
  return { url, execArgv: [...process.execArgv, "--import", tsx] };
}
