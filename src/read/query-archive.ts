/**
 * `pulpitum query`: SQL over a table's published payloads through DuckDB,
 * found through the query catalog (usecases/catalog.ts), never by listing
 * `payloads/` (which holds orphans and superseded payloads too).
 *
 * The table is a view under its own name with the schema v2 envelope as
 * DuckDB types, the same for Parquet and JSON payloads: `partition_key`
 * BLOB, `event_time` TIMESTAMP (UTC), `sort_key` BLOB, `value` BLOB. A
 * table mixing formats (a re-archive after a format change) is the union of
 * both. With no archived bucket the view is empty and keeps its schema.
 *
 * DuckDB never reads an object of the store itself: each catalogued payload
 * is copied through the project's object store into a private temporary
 * directory while its SHA-256 is checked against the content address in its
 * name (the manifest's `sha256`), and DuckDB reads only copies that matched;
 * a mismatch fails the query with an ArchiveIntegrityError naming the
 * object. That holds for the file store too: hashing its files in place and
 * then handing DuckDB the paths would check one read and serve another. The
 * copy costs one local write of every payload the view names, and their
 * total size in temporary disk space. The directory is removed when the
 * query ends, also on error, and after a crash by the next query
 * (read/query-staging.ts).
 *
 * The SQL runs in a confined DuckDB (read/query-engine.ts): it reads only
 * the staged copies, and a query error is the SQL's, unless a payload that
 * matched its address still cannot be decoded, which is then named.
 */
import os from "node:os";
import path from "node:path";
import type { DuckDBValue } from "@duckdb/node-api";
import { catalogFolder, parsePayloadName } from "../domain/object-keys.js";
import { ARCHIVE_FORMATS, type ArchiveFormat, type TableId } from "../domain/table.js";
import {
  ArchiveIntegrityError,
  InvalidInputError,
  InvariantViolationError,
  UnknownTableError,
} from "../errors.js";
import { runConfined } from "./query-engine.js";
import type { Clock } from "../ports/clock.js";
import {
  collectingOutput,
  DEFAULT_QUERY_LIMITS,
  QueryLimitError,
  type QueryColumn,
  type QueryLimits,
  type QueryOutput,
  type StatementSummary,
} from "./query-output.js";
import { acquireQueryStaging, type QueryStaging } from "./query-staging.js";
import type { HotReads } from "../ports/hot-store.js";
import { listAll, type ObjectStore } from "../ports/object-store.js";
import { readCatalogEntry } from "../usecases/catalog-entry.js";
import { downloadVerified } from "../archive/verified-object.js";
import {
  blameEntryIfWrong,
  catalogedBuckets,
  checkCatalogCovers,
  checkEntriesNameRecordedPayloads,
  checkNamedOnce,
  recordedPayloadKeys,
  type CatalogedEntry,
} from "./catalog-checks.js";

export interface QueryArchiveInput {
  readonly hotStore: HotReads;
  readonly objectStore: ObjectStore;
  readonly archivePrefix: string;
  readonly tableId: TableId;
  readonly sql: string;
  /** Where downloaded payloads are staged (default the OS temporary directory). */
  readonly tempDir?: string;
  /** Tells a restore running from one cut off, in the error that names its bucket (default the system clock). */
  readonly clock?: Clock;
  /** The query's bounds (default DEFAULT_QUERY_LIMITS). */
  readonly limits?: Partial<QueryLimits>;
}

export interface QuerySummary {
  /** How each statement's result ended, in order. */
  readonly statements: readonly StatementSummary[];
  /** Payload objects the view read, and how many of them were downloaded first. */
  readonly payloads: number;
  readonly downloaded: number;
}

export interface QueryResult extends QuerySummary {
  /** The last statement's columns and rows (at most the row cap). */
  readonly columns: readonly QueryColumn[];
  readonly rows: readonly (readonly DuckDBValue[])[];
}

export { QuerySqlError } from "./query-engine.js";

/** Payload files of one format, as local paths DuckDB reads, and the object key of each. */
interface PayloadFiles {
  readonly parquet: string[];
  readonly json: string[];
  readonly keyOf: Map<string, string>;
}

/**
 * Run the SQL and keep each statement's rows; the last statement's are
 * returned. A statement with more rows than the row cap fails the query
 * (QueryLimitError) rather than answer short: a caller that wants the first
 * rows of a longer answer uses queryArchiveTo, which says what was cut.
 */
export async function queryArchive(input: QueryArchiveInput): Promise<QueryResult> {
  const output = collectingOutput();
  const summary = await queryArchiveTo(input, output);
  const cut = summary.statements.findIndex((s) => s.cut);
  if (cut >= 0) {
    const cap = summary.statements[cut]!.rows;
    throw new QueryLimitError(
      "rows",
      `statement ${cut + 1} of the query has more rows than its row cap of ${cap}; ` +
        "narrow the query or raise the cap (`pulpitum query --limit`)",
    );
  }
  const last = output.statements[output.statements.length - 1];
  return { ...summary, columns: last?.columns ?? [], rows: last?.values ?? [] };
}

/** Run the SQL, handing each statement's rows to `output` as they are read. */
export async function queryArchiveTo(
  input: QueryArchiveInput,
  output: QueryOutput,
): Promise<QuerySummary> {
  const table = await input.hotStore.getTable(input.tableId);
  if (table === null) throw new UnknownTableError(input.tableId);
  if (table.dropping === true)
    throw new InvalidInputError(
      `table ${input.tableId}`,
      "is being dropped (`pulpitum tables drop`), its catalog already emptied",
      "a registered table that is not being dropped",
    );
  let staging: QueryStaging | undefined;
  const stagingDir = async () =>
    (staging ??= acquireQueryStaging(input.tempDir ?? os.tmpdir())).dir;
  try {
    const files: PayloadFiles = { parquet: [], json: [], keyOf: new Map() };
    let downloaded = 0;
    // The metadata first, the listing after (see checkCatalogCovers).
    const archived = await catalogedBuckets(input);
    const recorded = await recordedPayloadKeys(input);
    const slotsSeen = new Map<string, string>();
    const entries: CatalogedEntry[] = [];
    const invalid: ArchiveIntegrityError[] = [];
    for (const format of ARCHIVE_FORMATS)
      entries.push(...(await catalogEntriesOf(input, format, slotsSeen, invalid)));
    await checkCatalogCovers(input, archived, slotsSeen);
    if (invalid[0] !== undefined) throw invalid[0];
    const keysNamed = new Set<string>();
    for (const { format, entryKey, payloadKeys } of entries) {
      for (const key of payloadKeys) {
        checkNamedOnce(entryKey, key, keysNamed);
        const target = path.join(await stagingDir(), `${downloaded}.${format}`);
        try {
          await copyVerified(input.objectStore, entryKey, key, target);
        } catch (error) {
          throw await blameEntryIfWrong(input, archived, entryKey, key, error);
        }
        files[format].push(target);
        files.keyOf.set(target, key);
        downloaded++;
      }
    }
    await checkEntriesNameRecordedPayloads(input, recorded, entries);
    const limits = { ...DEFAULT_QUERY_LIMITS, ...input.limits };
    const statements = await runConfined(
      input.tableId,
      files,
      input.sql,
      await stagingDir(),
      output,
      limits,
    );
    return { statements, payloads: files.parquet.length + files.json.length, downloaded };
  } finally {
    staging?.release();
  }
}

/**
 * The table's non-empty catalog entries of one format, in key order, each
 * read as `verify` reads it (readCatalogEntry); an entry that is not valid
 * is added to `invalid`, which fails the query naming it once every bucket
 * was found listed (a missing entry is named first). A bucket with two non-empty entries
 * (`slotsSeen`: bucket slot -> the first entry's key) would be read twice:
 * that breaks the catalog's invariant and fails the query.
 */
async function catalogEntriesOf(
  input: QueryArchiveInput,
  format: ArchiveFormat,
  slotsSeen: Map<string, string>,
  invalid: ArchiveIntegrityError[],
): Promise<CatalogedEntry[]> {
  const entries: CatalogedEntry[] = [];
  const folder = catalogFolder(input.archivePrefix, format, input.tableId);
  for await (const object of listAll(input.objectStore, folder)) {
    if (object.size === 0) continue;
    const bytes = await input.objectStore.get(object.key);
    if (bytes.byteLength === 0) continue;
    const reading = await readCatalogEntry(
      input.objectStore,
      input.archivePrefix,
      { tableId: input.tableId, format },
      object.key,
      bytes,
    );
    if (!reading.valid) {
      // Its bucket is listed, wrongly: named as that, not as a missing entry.
      if (reading.slot !== undefined && !slotsSeen.has(reading.slot))
        slotsSeen.set(reading.slot, object.key);
      invalid.push(
        new ArchiveIntegrityError(
          object.key,
          `catalog entry ${reading.problem}; \`pulpitum catalog rebuild ${input.tableId}\` puts the catalog right`,
        ),
      );
      continue;
    }
    const first = slotsSeen.get(reading.slot);
    if (first !== undefined) {
      throw new InvariantViolationError(
        `the query catalog lists one bucket twice (${first} and ${object.key}); ` +
          "run `pulpitum catalog rebuild` and report this",
      );
    }
    slotsSeen.set(reading.slot, object.key);
    entries.push({
      format,
      entryKey: object.key,
      slot: reading.slot,
      payloadKeys: reading.payloadKeys,
    });
  }
  return entries;
}

/**
 * Copy a catalogued payload to `target` while hashing it, against the
 * SHA-256 its content-addressed name states (the manifest's `sha256`).
 */
async function copyVerified(
  store: ObjectStore,
  entryKey: string,
  key: string,
  target: string,
): Promise<void> {
  const name = parsePayloadName(key.slice(key.lastIndexOf("/") + 1));
  if (name === null) {
    throw new ArchiveIntegrityError(entryKey, `catalog entry names ${key}, which is not a payload`);
  }
  await downloadVerified(
    store,
    { key, sha256: name.sha256 },
    target,
    `by its content-addressed name, in catalog entry ${entryKey}`,
  );
}
