/**
 * `pulpitum rebind-archive` on the embedded store (PGlite and the file
 * archive under PULPITUM_HOME): a `--from` that is not the database's
 * binding is refused (exit 3) and audited `refused`, even when the database
 * belongs to the target already, as the command's help says; `--from`
 * naming the binding that is the target already changes nothing.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../../support/cli.js";

interface AuditJson {
  action_id: string;
  action: string;
  target: string;
  outcome: string;
  reason: string | null;
  arguments: Record<string, unknown>;
}

describe("rebind-archive on the embedded store", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const cli = (...args: string[]) => runCli(args, env);
  const trail = async (): Promise<AuditJson[]> => {
    const r = await cli("audit", "--json", "--limit", "10000");
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as AuditJson[];
  };
  const rebinds = async () => (await trail()).filter((r) => r.action === "rebind-archive");

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-rebind-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      PULPITUM_S3_SERVICE: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
    // The first command that writes the archive records it: `embedded`.
    const archived = await cli("archive", "--once");
    expect(archived.code, archived.stderr).toBe(0);
  }, 120_000);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("refuses a --from that is not the binding on a database bound to the target already: exit 3, the binding named, audited refused", async () => {
    // Act
    const refused = await cli("rebind-archive", "--from", "file:///srv/elsewhere", "--yes");

    // Assess
    expect(refused.code, refused.stderr).toBe(3);
    expect(refused.stderr).toContain(
      "this database belongs to the archive embedded (the archive PULPITUM_HOME names already), not to file:///srv/elsewhere: nothing was changed",
    );
    expect(refused.stdout).toBe("");
    expect(await rebinds()).toEqual([
      expect.objectContaining({
        target: "embedded",
        outcome: "refused",
        arguments: { from: "file:///srv/elsewhere" },
        reason: expect.stringContaining("belongs to the archive embedded") as unknown,
      }),
    ]);
  });

  it("with --from naming the binding, which is the target already, changes nothing, exits 0 and is audited done", async () => {
    // Act
    const kept = await cli("rebind-archive", "--from", "embedded", "--yes", "--json");

    // Assess
    expect(kept.code, kept.stderr).toBe(0);
    expect(JSON.parse(kept.stdout)).toMatchObject({ archive: "embedded" });
    expect((await rebinds()).map((r) => r.outcome).sort()).toEqual(["done", "refused"]);
  });
});
