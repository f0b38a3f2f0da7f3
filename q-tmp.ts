import pg from "pg"; import { readFileSync } from "node:fs";
const c = new pg.Client(readFileSync("/tmp/pgurl","utf8")); await c.connect();
const r = await c.query("select datname, state, wait_event_type, wait_event, now()-query_start as dur, left(query, 300) q from pg_stat_activity where state is not null and pid <> pg_backend_pid()");
console.log(r.rows); await c.end();
