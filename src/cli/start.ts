/**
 * `npm start`: the embedded default end to end. Seeds a sample chat table on
 * first run, archives every eligible bucket, prints a summary, and reads one
 * channel across archived and hot months to show the cutover.
 *
 * It writes about 100,000 rows and archives them, so it never does that to
 * stores it was not given for the purpose: DATABASE_URL and
 * PULPITUM_ARCHIVE_URL in an operator's shell name production. Unless
 * `--use-configured-stores` says otherwise, the demo ignores them (saying so)
 * and runs on its own embedded store under PULPITUM_HOME.
 */
import { describeBucket } from "../domain/bucket.js";
import { formatCutoffAt } from "../domain/cutoff.js";
import { eligibilityAt } from "../usecases/eligibility.js";
import type { TableRecord } from "../domain/record.js";
import { parseTableId, type TableId } from "../domain/table.js";
import type { PhaseName } from "../ports/hot-store.js";
import { DurableTable } from "../read/durable-table.js";
import { runStandalone } from "../runner/standalone.js";
import type { Adapters } from "../open-adapters.js";
import { rawValue } from "../config/variables.js";
import { formatBytes, renderTable } from "./format.js";
import { stderrLog } from "./log.js";
import { ProgressBar } from "./progress.js";
import { withArchiveRuntime } from "./session.js";

export const SAMPLE_TABLE: TableId = parseTableId("chat");
const CHANNELS = ["general", "random", "ops", "dev", "support", "sales", "design", "hiring"];
const MESSAGES_PER_CHANNEL_MONTH = 270;
const AUTHORS = ["ada", "grace", "alan", "edsger", "barbara", "ken", "dennis", "margaret"];
const WORDS =
  "archive bucket lease fence manifest parquet publish cleanup shard replica snapshot cutoff retry queue worker".split(
    " ",
  );

/** A small deterministic PRNG (mulberry32), so every fresh clone seeds the same sample. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Messages for every channel and month from January three years back up to `now`. */
export function* sampleChatMessages(now: Date): Iterable<TableRecord> {
  const random = prng(20240501);
  const encoder = new TextEncoder();
  const firstYear = now.getUTCFullYear() - 3;
  let id = 0n;
  for (let year = firstYear; year <= now.getUTCFullYear(); year++) {
    for (let month = 0; month < 12; month++) {
      const start = Date.UTC(year, month, 1);
      if (start > now.getTime()) return;
      const end = Math.min(Date.UTC(year, month + 1, 1), now.getTime());
      for (const channel of CHANNELS) {
        const times = Array.from(
          { length: MESSAGES_PER_CHANNEL_MONTH },
          () => BigInt(start) * 1000n + BigInt(Math.floor(random() * (end - start) * 1000)),
        ).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        for (const eventTime of times) {
          id++;
          const sortKey = new Uint8Array(8);
          new DataView(sortKey.buffer).setBigUint64(0, id);
          const text = Array.from(
            { length: 4 + Math.floor(random() * 8) },
            () => WORDS[Math.floor(random() * WORDS.length)],
          ).join(" ");
          const author = AUTHORS[Math.floor(random() * AUTHORS.length)];
          yield {
            partitionKey: encoder.encode(channel),
            eventTime,
            sortKey,
            value: encoder.encode(JSON.stringify({ author, text })),
          };
        }
      }
    }
  }
}

/** The variables that point the demo at external stores: ignored unless `--use-configured-stores`. */
export const CONFIGURED_STORE_VARIABLES = ["DATABASE_URL", "PULPITUM_ARCHIVE_URL"] as const;

/** `pulpitum start` (`npm start`). */
export async function startCommand(opts: { useConfiguredStores?: boolean }): Promise<void> {
  const set = CONFIGURED_STORE_VARIABLES.filter(
    (name) => rawValue(process.env, name) !== undefined,
  );
  let env = process.env;
  if (set.length > 0 && opts.useConfiguredStores !== true) {
    env = { ...process.env };
    for (const name of set) delete env[name];
    process.stderr.write(
      `pulpitum: ${set.join(" and ")} ${set.length === 1 ? "is" : "are"} set and ignored: the demo runs on its own embedded store under PULPITUM_HOME and leaves the configured stores untouched; \`pulpitum start --use-configured-stores\` (\`npm start -- --use-configured-stores\`) seeds and archives the sample there instead\n`,
    );
  }
  await withArchiveRuntime(async (rt) => runEmbeddedDemo(rt), { env });
}

export async function runEmbeddedDemo(rt: Adapters): Promise<void> {
  const log = stderrLog(process.env.PULPITUM_LOG === "debug");
  const where =
    rt.config.database.kind === "pglite"
      ? `embedded PGlite in ${rt.config.database.dataDir}, archive in ${rt.config.archive.kind === "file" ? rt.config.archive.root : "S3"}`
      : "the configured database and archive";
  console.log(`Pulpitum on ${where}`);
  console.log(
    `cutoff ${formatCutoffAt(rt.config.cutoff, rt.clock.now())}${rt.config.cutoff.kind === "previous-utc-year" ? " (January 1 of the previous UTC year)" : ""}`,
  );

  if ((await rt.hotStore.getTable(SAMPLE_TABLE)) === null) {
    await seedSample(rt);
  } else {
    console.log(`sample table ${SAMPLE_TABLE} already present: nothing seeded`);
  }

  const now = rt.clock.now();
  const { cutoffs } = await eligibilityAt(rt.hotStore, rt.config.cutoff, now);
  const pending = await rt.hotStore.peekCandidates({
    now,
    ...cutoffs,
    limit: 10_000,
    enqueuedBefore: now,
  });
  if (pending.length === 0) {
    const report = await rt.hotStore.statusReport(now, cutoffs);
    const archived = report.tables
      .flatMap((t) => t.states)
      .filter((s) => s.state === "archived")
      .reduce((n, s) => n + s.buckets, 0);
    const held = await rt.hotStore.listHeldBuckets({ now, ...cutoffs, limit: 1000 });
    console.log(
      `nothing new to archive: ${archived} buckets are already archived and every other bucket ` +
        `ends after the cutoff ${formatCutoffAt(rt.config.cutoff, now)}` +
        (held.length === 0
          ? ""
          : `, or is held back (${held.length}: a paused table, a restore's hold, a retry or work in flight; \`pulpitum plan\` lists them with the reason)`),
    );
  } else {
    await archiveWithProgress(rt, pending.length, log);
  }
  await showCutover(rt);
}

async function seedSample(rt: Adapters): Promise<void> {
  await rt.hotStore.registerTable(
    {
      tableId: SAMPLE_TABLE,
      strategy: "CalendarMonthUtc",
      format: "parquet",
      writableBuckets: null,
    },
    rt.clock.now(),
  );
  const now = rt.clock.now();
  const bar = new ProgressBar(`seeding ${SAMPLE_TABLE}`, undefined);
  const started = Date.now();
  let batch: TableRecord[] = [];
  let total = 0;
  for (const record of sampleChatMessages(now)) {
    batch.push(record);
    if (batch.length === 2000) {
      total += (await rt.hotStore.append(SAMPLE_TABLE, batch, rt.clock.now())).inserted;
      batch = [];
      bar.update(total, "messages");
    }
  }
  if (batch.length > 0)
    total += (await rt.hotStore.append(SAMPLE_TABLE, batch, rt.clock.now())).inserted;
  bar.finish();
  console.log(
    `seeded table ${SAMPLE_TABLE} (monthly buckets, Parquet): ${total} messages in ${CHANNELS.length} channels in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
}

async function archiveWithProgress(
  rt: Adapters,
  total: number,
  log: ReturnType<typeof stderrLog>,
): Promise<void> {
  const bar = new ProgressBar("archiving", total);
  const perPhase = new Map<PhaseName, { runs: number; ms: number }>();
  let finished = 0;
  let rows = 0;
  let bytes = 0;
  const started = Date.now();
  const summary = await runStandalone(rt.context(log), {
    workers: rt.config.workers,
    intervalMs: 0,
    once: true,
    onOutcome: (o) => {
      if (o.phase !== null && o.result === "advanced") {
        const entry = perPhase.get(o.phase) ?? { runs: 0, ms: 0 };
        entry.runs++;
        entry.ms += o.durationMs;
        perPhase.set(o.phase, entry);
      }
      if (o.phase === "export" && o.result === "advanced") {
        rows += o.rows ?? 0;
        bytes += o.bytes ?? 0;
      }
      if (o.result === "advanced" && o.next === null) finished++;
      bar.update(finished, describeBucket(o.bucket));
    },
  });
  bar.finish();
  const seconds = (Date.now() - started) / 1000;
  console.log(
    `archived ${finished} buckets: ${rows} rows, ${formatBytes(bytes)} of Parquet, ${seconds.toFixed(1)} s, ${Math.round(rows / Math.max(seconds, 0.001))} rows/s` +
      (summary.failures > 0 ? `, ${summary.failures} failed phase runs (see the log above)` : ""),
  );
  console.log(
    renderTable(
      ["phase", "runs", "total ms", "ms per run"],
      (["claim", "export", "seal", "publish", "cleanup"] as PhaseName[]).map((p) => {
        const e = perPhase.get(p) ?? { runs: 0, ms: 0 };
        return [p, e.runs, e.ms, e.runs > 0 ? (e.ms / e.runs).toFixed(1) : "-"];
      }),
    ),
  );
}

/** Read one channel from its first month to now, page by page, and say which tier served each month. */
async function showCutover(rt: Adapters): Promise<void> {
  const channel = new TextEncoder().encode(CHANNELS[0]!);
  const table = new DurableTable({
    hotStore: rt.hotStore,
    objectStore: rt.objectStore,
    clock: rt.clock,
    archivePrefix: rt.archivePrefix,
  });
  const buckets = await rt.hotStore.listPartitionBuckets(SAMPLE_TABLE, channel, {});
  let cursor: string | undefined;
  let pages = 0;
  const perMonth = new Map<string, number>();
  const started = Date.now();
  do {
    const page = await table.read(SAMPLE_TABLE, channel, { cursor, limit: 1000 });
    pages++;
    for (const r of page.records) {
      const month = new Date(Number(r.eventTime / 1000n)).toISOString().slice(0, 7);
      perMonth.set(month, (perMonth.get(month) ?? 0) + 1);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
  const total = [...perMonth.values()].reduce((a, b) => a + b, 0);
  const tiers = buckets.map((b) => ({
    month: b.id.bucketKey.slice("month:".length),
    tier: b.state === "archived" ? "archive" : "hot store",
    rows: perMonth.get(b.id.bucketKey.slice("month:".length)) ?? 0,
  }));
  const archived = tiers.filter((t) => t.tier === "archive");
  const hot = tiers.filter((t) => t.tier === "hot store");
  const span = (list: typeof tiers) =>
    list.length === 0
      ? "none"
      : `${list[0]!.month} .. ${list[list.length - 1]!.month} (${list.length} months, ${list.reduce((n, t) => n + t.rows, 0)} messages)`;
  console.log(
    `\nread channel "${CHANNELS[0]}" across the cutover: ${total} messages in ${pages} pages in ${Date.now() - started} ms`,
  );
  console.log(`  from the archive:   ${span(archived)}`);
  console.log(`  from the hot store: ${span(hot)}`);
}
