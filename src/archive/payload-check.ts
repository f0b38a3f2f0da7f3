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
 * The thread: one per process, started on first use and shared by every
 * check (a worker Lambda running several exports sends them all to it),
 * referenced only while a check waits for its result, so an idle thread
 * never keeps the process alive. Messages on its port keep their order, so
 * a check sees its announcements before its finish.
 */
import { existsSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker, type MessagePort } from "node:worker_threads";
import { ArchiveIntegrityError } from "../errors.js";
import type { ArchiveFormat } from "../domain/table.js";
import { readFully } from "../file-read.js";
import { fileByteSource } from "./byte-sources.js";
import { AnnouncedGroupsCheck, type AnnouncedRowGroup } from "./parquet/announced-groups.js";
import { inspectPayload, type PayloadContent, type PayloadExpectations } from "./payload-reader.js";

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
  /** The file is complete at `byteLength` bytes: its decoded content, once every check passed. */
  finish(byteLength: number): Promise<PayloadContent>;
  /** The write failed: drop the check (the file may be removed). */
  cancel(): void;
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
  #handle: Promise<FileHandle> | undefined;
  #chain: Promise<void> = Promise.resolve();
  #failure: { error: unknown } | undefined;
  #cancelled = false;

  constructor(private readonly target: PayloadCheckTarget) {
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

  async finish(byteLength: number): Promise<PayloadContent> {
    await this.#chain;
    try {
      if (this.#failure !== undefined) throw this.#failure.error;
      const { filePath, format, expected } = this.target;
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
      } finally {
        await source.close();
      }
    } finally {
      await this.#release();
    }
  }

  cancel(): void {
    this.#cancelled = true;
    this.#chain = this.#chain.then(() => this.#release());
  }

  async #read(start: number, end: number, into: Buffer): Promise<Uint8Array> {
    this.#handle ??= open(this.target.filePath, "r");
    const range = into.subarray(0, Math.max(0, end - start));
    return range.subarray(0, await readFully(await this.#handle, range, start));
  }

  async #release(): Promise<void> {
    this.#groups?.close();
    const handle = this.#handle;
    this.#handle = undefined;
    await (await handle?.catch(() => undefined))?.close();
  }
}

type Request =
  | { readonly kind: "start"; readonly id: number; readonly target: PayloadCheckTarget }
  | { readonly kind: "announce"; readonly id: number; readonly group: AnnouncedRowGroup }
  | { readonly kind: "finish"; readonly id: number; readonly byteLength: number }
  | { readonly kind: "cancel"; readonly id: number };

/** A failure sent back over the port: an integrity verdict, or any other error. */
type Failure =
  | { readonly integrity: true; readonly objectKey: string; readonly problem: string }
  | { readonly integrity: false; readonly name: string; readonly message: string };

type Reply =
  | { readonly id: number; readonly content: PayloadContent }
  | { readonly id: number; readonly failure: Failure };

/** The worker thread's side: run each check it is sent, on that thread. */
export function serveChecks(port: MessagePort): void {
  const checks = new Map<number, LocalPayloadCheck>();
  port.on("message", (request: Request) => {
    switch (request.kind) {
      case "start":
        checks.set(request.id, new LocalPayloadCheck(request.target));
        return;
      case "announce":
        checks.get(request.id)?.announce(request.group);
        return;
      case "cancel":
        checks.get(request.id)?.cancel();
        checks.delete(request.id);
        return;
      case "finish": {
        const check = checks.get(request.id);
        checks.delete(request.id);
        const reply = (r: Reply) => port.postMessage(r);
        if (check === undefined) {
          const message = `check ${request.id} was never started on this thread`;
          reply({ id: request.id, failure: { integrity: false, name: "Error", message } });
          return;
        }
        check.finish(request.byteLength).then(
          (content) => reply({ id: request.id, content }),
          (error: unknown) => reply({ id: request.id, failure: failureOf(error) }),
        );
      }
    }
  });
}

function failureOf(error: unknown): Failure {
  if (error instanceof ArchiveIntegrityError)
    return { integrity: true, objectKey: error.objectKey, problem: error.problem };
  const e = error instanceof Error ? error : new Error(String(error));
  return { integrity: false, name: e.name, message: e.message };
}

function errorOf(failure: Failure): Error {
  if (failure.integrity) return new ArchiveIntegrityError(failure.objectKey, failure.problem);
  const error = new Error(failure.message);
  error.name = failure.name;
  return error;
}

/** The thread died: its checks are done again on this thread. */
class ThreadLost extends Error {}

class CheckThread {
  readonly #worker: Worker;
  readonly #waiting = new Map<number, (reply: Reply | ThreadLost) => void>();
  #nextId = 0;
  /** Why the thread is gone, once it is: nothing posted to it is answered. */
  #lost: string | undefined;

  constructor(entry: WorkerEntry) {
    this.#worker = new Worker(entry.url, { execArgv: entry.execArgv });
    this.#worker.unref();
    this.#worker.on("message", (reply: Reply) => {
      const settle = this.#waiting.get(reply.id);
      this.#waiting.delete(reply.id);
      if (this.#waiting.size === 0) this.#worker.unref();
      settle?.(reply);
    });
    const lost = (why: string) => {
      this.#lost ??= why;
      if (thread === this) thread = undefined;
      for (const settle of this.#waiting.values()) settle(new ThreadLost(why));
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
      cancel: () => post({ kind: "cancel", id }),
      finish: async (byteLength) => {
        const reply = await new Promise<Reply | ThreadLost>((settle) => {
          if (this.#lost !== undefined) return settle(new ThreadLost(this.#lost));
          this.#waiting.set(id, settle);
          this.#worker.ref();
          post({ kind: "finish", id, byteLength });
        });
        if (reply instanceof ThreadLost)
          return await new LocalPayloadCheck(target).finish(byteLength);
        if ("failure" in reply) throw errorOf(reply.failure);
        return reply.content;
      },
    };
  }

  /** End the thread; checks waiting on it are done again on the calling thread. */
  async stop(): Promise<void> {
    await this.#worker.terminate();
  }
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
