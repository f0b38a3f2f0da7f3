/**
 * Migration 24: `hand_on_unsent_since`, when a committed phase promised to
 * enqueue its bucket's next phase itself (fences.ts, HAND_ON) and no send of
 * that message has been reported since. The worker clears it once the
 * message is sent (hot-store/hand-ons.ts), the next lease clears it (the
 * message arrived), and discovery offers a bucket whose promise is older
 * than the hand-on grace at once, instead of after the requeue window
 * (hot-store/discovery.ts): its committer died between the commit and the
 * send, so no message of it is in flight. A plain nullable column: the same
 * on PostgreSQL, CockroachDB and PGlite, and safe to add again.
 */
import type { Migration } from "./migrations.js";
import { METADATA_TABLE } from "./schema-names.js";

export const HAND_ON_UNSENT_MIGRATION: Migration = {
  version: 24,
  name: "hand-ons not yet sent",
  statements: [
    `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS hand_on_unsent_since TIMESTAMPTZ NULL`,
  ],
};
