/**
 * Property-based fuzzing of the parsers that read bytes from outside: each
 * hostile input must give a correct result or the parser's typed error
 * (a PulpitumError subclass), never another exception, never a hang.
 *
 * PULPITUM_FUZZ_RUNS sets the cases per parser (default 200, what `npm test`
 * runs; `npm run fuzz` runs 10 000). PULPITUM_FUZZ_SEED replays a run: a
 * failure's report names its seed and the shrunk counterexample.
 */
import fc from "fast-check";

const DEFAULT_RUNS = 200;

function integerVariable(name: string, min: number): number | undefined {
  const text = process.env[name];
  if (text === undefined || text === "") return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min)
    throw new Error(`${name}=${text} is not an integer >= ${min}`);
  return n;
}

export const FUZZ_RUNS = integerVariable("PULPITUM_FUZZ_RUNS", 1) ?? DEFAULT_RUNS;
const FUZZ_SEED = integerVariable("PULPITUM_FUZZ_SEED", -(2 ** 31));

/** A vitest timeout for a property whose cases take up to `msPerCase` each, on average. */
export function fuzzTimeout(msPerCase = 2): number {
  return 60_000 + FUZZ_RUNS * msPerCase * 4;
}

type ErrorClass = abstract new (...args: never[]) => Error;

export interface FuzzOptions {
  /** The longest one case may take (a hang fails the case). Default 2 s. */
  readonly caseTimeoutMs?: number;
}

/**
 * Run `check` on FUZZ_RUNS values of `arbitrary` and print how many ran.
 * A case fails when `check` throws, or takes longer than the case timeout
 * (a synchronous parser cannot be interrupted, so its time is measured; an
 * asynchronous one is also abandoned at the timeout).
 */
export async function fuzz<T>(
  name: string,
  arbitrary: fc.Arbitrary<T>,
  check: (value: T) => void | Promise<void>,
  options: FuzzOptions = {},
): Promise<void> {
  const caseTimeoutMs = options.caseTimeoutMs ?? 2_000;
  const property = fc.asyncProperty(arbitrary, async (value) => {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const hang = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the case did not finish within ${caseTimeoutMs} ms`)),
        caseTimeoutMs,
      );
    });
    try {
      await Promise.race([check(value), hang]);
    } finally {
      clearTimeout(timer);
    }
    const took = performance.now() - started;
    if (took > caseTimeoutMs) {
      throw new Error(`the case took ${Math.round(took)} ms, over the ${caseTimeoutMs} ms allowed`);
    }
  });
  const details = await fc.check(property, {
    numRuns: FUZZ_RUNS,
    ...(FUZZ_SEED === undefined ? {} : { seed: FUZZ_SEED }),
  });
  console.log(`fuzz: ${name}: ${details.numRuns} cases${details.failed ? " (FAILED)" : ""}`);
  if (details.failed) {
    const error = details.errorInstance;
    const why = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new Error(`${fc.defaultReportMessage(details) ?? "property failed"}\nGot ${why}`, {
      cause: error,
    });
  }
}

/**
 * The result of `call`, or the error it threw when that is one of
 * `expected`; any other exception escapes, named as a finding.
 */
export async function resultOrTyped<T>(
  expected: ErrorClass | readonly ErrorClass[],
  call: () => T | Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: Error }> {
  const classes = Array.isArray(expected) ? expected : [expected as ErrorClass];
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    if (classes.some((c) => error instanceof c)) return { ok: false, error: error as Error };
    const what = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new Error(
      `an exception other than ${classes.map((c) => c.name).join(" or ")} escaped: ${what}`,
      { cause: error },
    );
  }
}

/** Hostile JSON values: anything JSON can hold, deep and with odd keys. */
export const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 4 });

/** `valid` with fields replaced by arbitrary JSON, removed, or joined by unknown ones. */
export function mutatedObject(valid: Record<string, unknown>): fc.Arbitrary<unknown> {
  const keys = Object.keys(valid);
  const field = fc.oneof(fc.constantFrom(...keys), fc.string({ maxLength: 12 }));
  const edit = fc.oneof(
    fc.record({ kind: fc.constant("set" as const), field, value: anyJson }),
    fc.record({ kind: fc.constant("delete" as const), field: fc.constantFrom(...keys) }),
  );
  return fc.array(edit, { minLength: 1, maxLength: 4 }).map((edits) => {
    const o: Record<string, unknown> = { ...valid };
    for (const e of edits) {
      if (e.kind === "delete") delete o[e.field];
      else
        Object.defineProperty(o, e.field, {
          value: e.value,
          enumerable: true,
          writable: true,
          configurable: true,
        });
    }
    return o;
  });
}

/** Arbitrary JSON, or `valid` mutated: the two kinds of hostile event a handler receives. */
export function hostileObject(valid: Record<string, unknown>): fc.Arbitrary<unknown> {
  return fc.oneof(
    { arbitrary: anyJson, weight: 1 },
    { arbitrary: mutatedObject(valid), weight: 3 },
    { arbitrary: fc.constant(valid), weight: 1 },
  );
}

/** Lengths a lying header claims: around powers of two and the integer limits. */
const hugeLength = fc.constantFrom(
  0x7f,
  0xff,
  0x7fff,
  0xffff,
  0x7fffff,
  0x7fffffff,
  0x80000000,
  0xfffffffe,
  0xffffffff,
);

/**
 * `valid`'s bytes damaged as storage, transport or a hostile writer damage
 * them: truncated, bits flipped, a range overwritten, cut out or repeated,
 * a little-endian 32-bit length overwritten with a huge one, or the same
 * aimed at the last `tail` bytes (where a Parquet footer and its length
 * sit).
 */
export function mutatedBytes(valid: Uint8Array, tail = 0): fc.Arbitrary<Uint8Array> {
  const n = valid.byteLength;
  const index = (from = 0) => fc.integer({ min: Math.min(from, n), max: Math.max(0, n - 1) });
  const near = tail > 0 ? fc.oneof(index(), index(n - tail)) : index();
  const copy = () => new Uint8Array(valid);
  return fc.oneof(
    index().map((at) => valid.slice(0, at)),
    fc
      .array(fc.tuple(near, fc.integer({ min: 0, max: 7 })), { minLength: 1, maxLength: 8 })
      .map((flips) => {
        const out = copy();
        for (const [at, bit] of flips) if (at < n) out[at]! ^= 1 << bit;
        return out;
      }),
    fc.tuple(near, fc.uint8Array({ minLength: 1, maxLength: 16 })).map(([at, bytes]) => {
      const out = copy();
      out.set(bytes.subarray(0, Math.max(0, n - at)), at);
      return out;
    }),
    fc
      .tuple(index(), fc.integer({ min: 1, max: 64 }))
      .map(([at, length]) => Buffer.concat([valid.subarray(0, at), valid.subarray(at + length)])),
    fc
      .tuple(index(), fc.integer({ min: 1, max: 64 }))
      .map(([at, length]) => Buffer.concat([valid.subarray(0, at + length), valid.subarray(at)])),
    fc.tuple(near, hugeLength).map(([at, length]) => {
      const out = copy();
      if (at + 4 <= n) new DataView(out.buffer).setUint32(at, length, true);
      return out;
    }),
  );
}

/** `valid` text damaged byte-wise (see {@link mutatedBytes}), as UTF-8 or not. */
export function mutatedText(valid: string): fc.Arbitrary<string> {
  return fc.oneof(
    mutatedBytes(Buffer.from(valid, "utf8")).map((bytes) => Buffer.from(bytes).toString("utf8")),
    fc.string({ unit: "binary", maxLength: 200 }),
    fc.constant(valid),
  );
}
