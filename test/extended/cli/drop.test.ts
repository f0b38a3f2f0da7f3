/** `pulpitum tables drop` end to end on the embedded store. */
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openPgliteHotStore } from "../../../src/adapters/sql/index.js";
import { parseTableId } from "../../../src/domain/table.js";
import { runCli } from "../../support/cli.js";

const line = (pk: string, t: string, sk: string) =>
  JSON.stringify({
    partition_key: Buffer.from(pk).toString("base64"),
    event_time: t,
    sort_key: Buffer.from(sk).toString("base64"),
    value: Buffer.from(`v-${sk}`).toString("base64"),
  });

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && !e.name.startsWith(".tmp-"))
    .map((e) => path.join(e.parentPath, e.name));
}

describe("pulpitum tables drop", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-drop-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-06-01T00:00:00Z",
    };
    expect((await runCli(["tables", "create", "chat", "--strategy", "month"], env)).code).toBe(0);
    const file = path.join(home, "in.ndjson");
    writeFileSync(
      file,
      [
        line("room", "2025-01-02T00:00:00Z", "a"),
        line("room", "2025-02-02T00:00:00Z", "b"),
        line("room", "2025-09-02T00:00:00Z", "c"),
      ].join("\n"),
    );
    expect((await runCli(["import", "chat", file], env)).code).toBe(0);
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);
  }, 120_000);
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("drops the table's buckets and hot rows, says its archive objects stay until gc --include-unowned, and gc then removes them", async () => {
    const archive = path.join(home, "archive");
    expect(filesUnder(path.join(archive, "v4"))).toHaveLength(4);
    expect(filesUnder(path.join(archive, "catalog"))).toHaveLength(2); // query catalog entries
    const unconfirmed = await runCli(["tables", "drop", "chat"], env);
    expect(unconfirmed.code).toBe(2);

    const r = await runCli(["tables", "drop", "chat", "--yes"], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /dropped table chat: 3 buckets and 1 hot row deleted; the table is no longer registered/,
    );
    expect(r.stdout).toMatch(
      /the archive objects of its 2 archived buckets stay in the archive, referenced by nothing; `pulpitum gc --include-unowned` deletes them once they are older than ARCHIVER_GC_MIN_AGE_SECONDS/,
    );
    expect((await runCli(["tables", "list"], env)).stdout).toMatch(/no tables registered/);
    const read = await runCli(["read", "chat", "room"], env);
    expect(read.code).toBe(3);
    expect(read.stderr).toMatch(/table "chat" is not registered/);
    expect(filesUnder(path.join(archive, "v4"))).toHaveLength(4);
    // The catalog entries stay as tombstones: empty, read as no rows.
    const tombstones = filesUnder(path.join(archive, "catalog"));
    expect(tombstones).toHaveLength(2);
    expect(tombstones.map((f) => statSync(f).size)).toEqual([0, 0]);

    const old = new Date(Date.now() - 2 * 86_400_000);
    for (const f of filesUnder(archive)) utimesSync(f, old, old);
    const kept = JSON.parse((await runCli(["gc", "--json"], env)).stdout);
    expect(kept).toMatchObject({ deleted_objects: 0, kept: { unowned: 4 } });
    const gc = JSON.parse((await runCli(["gc", "--include-unowned", "--json"], env)).stdout);
    expect(gc.deleted_objects).toBe(4);
    expect(existsSync(path.join(archive, "v4"))).toBe(false);
  }, 120_000);

  it("refuses while a bucket is in flight, naming it, and exits 1 with nothing changed", async () => {
    const store = await openPgliteHotStore(path.join(home, "db"));
    const id = {
      tableId: parseTableId("chat"),
      partitionKey: new TextEncoder().encode("room"),
      bucketKey: "month:2025-09",
    };
    expect((await store.acquireLease(id, new Date(), 3_600_000)).kind).toBe("acquired");
    await store.close();
    const r = await runCli(["tables", "drop", "chat", "--yes"], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /table chat cannot be dropped while buckets are in flight: chat\/room\/month:2025-09 \(claim leased until .*\)\. Nothing was changed/,
    );
    expect((await runCli(["tables", "list"], env)).stdout).toMatch(/chat +month/);
  }, 60_000);
});
