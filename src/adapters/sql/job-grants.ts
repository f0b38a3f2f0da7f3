/**
 * What each database role may do, table by table: one role per job, each
 * holding only what its job's statements need (`pulpitum roles print`
 * grants exactly this; test/integration/db-roles-pg.test.ts runs each job
 * as its role and tries what it must not do).
 *
 * - worker: discovery and the archival worker (claim, export, seal,
 *   publish, cleanup, expiry; a bucket archived by hand);
 * - eraser: erasure jobs, their receipts and the rewrite of erased buckets;
 * - maintainer: garbage collection and the scrub (marks, progress, the
 *   proof of finished erasures, the audit trail's check);
 * - replayer: the DLQ replay, which touches no table but writes its record;
 * - restorer: the restore function (records back into the hot store);
 * - app: the operator's `pulpitum` command and the standalone archiver,
 *   which may take any of the jobs above by hand, and imports;
 * - reader: reads only.
 *
 * No role but the migrator (the owner) writes the migrations ledger, writes
 * the audit trail except through its routine, or deletes an erasure job or
 * receipt; the maintainer may change only the two proof columns of a job.
 */
import {
  ARCHIVE_BINDING_TABLE,
  AUDIT_CHAIN_TABLE,
  AUDIT_TABLE,
  ERASURE_JOBS_TABLE,
  ERASURE_RECEIPTS_TABLE,
  GC_PROGRESS_TABLE,
  METADATA_TABLE,
  MIGRATIONS_TABLE,
  PARTS_TABLE,
  POLICY_HISTORY_TABLE,
  RECORDS_TABLE,
  SCRUB_PROGRESS_TABLE,
  TABLES_TABLE,
} from "./schema-names.js";

/** The roles a job runs as, besides the migrator (which owns the schema). */
export const JOB_ROLES = [
  "app",
  "reader",
  "worker",
  "eraser",
  "maintainer",
  "replayer",
  "restorer",
] as const;
export type JobRole = (typeof JOB_ROLES)[number];

/** One grant: privileges on a table, or (`columns`) UPDATE of some columns only. */
export interface TableGrant {
  readonly table: string;
  readonly privileges: readonly ("SELECT" | "INSERT" | "UPDATE" | "DELETE")[];
  /** UPDATE limited to these columns (PostgreSQL; CockroachDB grants the table's UPDATE). */
  readonly updateColumns?: readonly string[];
}

/** Every table the migrations create, the trail's chain head included. */
export const ALL_TABLES: readonly string[] = [
  MIGRATIONS_TABLE,
  TABLES_TABLE,
  METADATA_TABLE,
  RECORDS_TABLE,
  PARTS_TABLE,
  GC_PROGRESS_TABLE,
  SCRUB_PROGRESS_TABLE,
  ARCHIVE_BINDING_TABLE,
  POLICY_HISTORY_TABLE,
  ERASURE_JOBS_TABLE,
  ERASURE_RECEIPTS_TABLE,
  AUDIT_TABLE,
  AUDIT_CHAIN_TABLE,
];

const read = (...tables: string[]): TableGrant[] =>
  tables.map((table) => ({ table, privileges: ["SELECT"] }));

/** Reading a table's settings and the schema's version, which every job does. */
const SETTINGS = read(MIGRATIONS_TABLE, TABLES_TABLE, POLICY_HISTORY_TABLE);
/** The archive this database belongs to: read, and recorded at first use. */
const BINDING: TableGrant = { table: ARCHIVE_BINDING_TABLE, privileges: ["SELECT", "INSERT"] };
/** A bucket's version: its metadata row changes, its parts are recorded and replaced. */
const BUCKET_VERSIONS: TableGrant[] = [
  { table: METADATA_TABLE, privileges: ["SELECT", "UPDATE"] },
  { table: PARTS_TABLE, privileges: ["SELECT", "INSERT", "DELETE"] },
  BINDING,
];

const EVERYTHING: TableGrant[] = [
  ...read(MIGRATIONS_TABLE, AUDIT_TABLE, AUDIT_CHAIN_TABLE),
  ...[
    TABLES_TABLE,
    METADATA_TABLE,
    RECORDS_TABLE,
    PARTS_TABLE,
    GC_PROGRESS_TABLE,
    SCRUB_PROGRESS_TABLE,
    ARCHIVE_BINDING_TABLE,
    POLICY_HISTORY_TABLE,
  ].map((table): TableGrant => ({ table, privileges: ["SELECT", "INSERT", "UPDATE", "DELETE"] })),
  { table: ERASURE_JOBS_TABLE, privileges: ["SELECT", "INSERT", "UPDATE"] },
  { table: ERASURE_RECEIPTS_TABLE, privileges: ["SELECT", "INSERT", "UPDATE"] },
];

export const JOB_GRANTS: Readonly<Record<JobRole, readonly TableGrant[]>> = {
  app: EVERYTHING,
  reader: read(...ALL_TABLES),
  worker: [
    ...SETTINGS,
    ...BUCKET_VERSIONS,
    { table: RECORDS_TABLE, privileges: ["SELECT", "DELETE"] },
  ],
  eraser: [
    ...SETTINGS,
    ...BUCKET_VERSIONS,
    { table: RECORDS_TABLE, privileges: ["SELECT", "DELETE"] },
    { table: ERASURE_JOBS_TABLE, privileges: ["SELECT", "INSERT", "UPDATE"] },
    { table: ERASURE_RECEIPTS_TABLE, privileges: ["SELECT", "INSERT", "UPDATE"] },
  ],
  maintainer: [
    ...SETTINGS,
    { table: METADATA_TABLE, privileges: ["SELECT", "UPDATE"] },
    ...read(RECORDS_TABLE, PARTS_TABLE, ERASURE_RECEIPTS_TABLE, AUDIT_TABLE, AUDIT_CHAIN_TABLE),
    BINDING,
    { table: GC_PROGRESS_TABLE, privileges: ["SELECT", "INSERT", "UPDATE"] },
    { table: SCRUB_PROGRESS_TABLE, privileges: ["SELECT", "INSERT", "UPDATE"] },
    {
      table: ERASURE_JOBS_TABLE,
      privileges: ["SELECT"],
      updateColumns: ["proved_at", "proof_problems"],
    },
  ],
  replayer: read(MIGRATIONS_TABLE),
  restorer: [
    ...SETTINGS,
    ...BUCKET_VERSIONS,
    { table: RECORDS_TABLE, privileges: ["SELECT", "INSERT"] },
  ],
};

/** The roles that write audit records (through the routine): every one but the reader. */
export const TRAIL_WRITERS: readonly JobRole[] = JOB_ROLES.filter((r) => r !== "reader");
