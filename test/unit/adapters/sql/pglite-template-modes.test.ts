/**
 * The embedded database's template is shared by every user of an
 * installation, and each user's copy is private: initdb leaves some files
 * 0600, which made a second OS user's first run fail to copy the template.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  chmodTree,
  pgliteVersion,
  seedFromTemplate,
} from "../../../../src/adapters/sql/pglite-template.js";

const mode = (file: string) => statSync(file).mode & 0o777;

describe("the embedded template's file modes", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(path.join(os.tmpdir(), "pulpitum-template-"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("a template made shareable is readable by everyone, and a seeded home is private to its owner", () => {
    const template = path.join(root, "template");
    mkdirSync(path.join(template, "pg_logical"), { recursive: true, mode: 0o700 });
    writeFileSync(path.join(template, "PG_VERSION"), "17\n");
    writeFileSync(path.join(template, "pg_logical", "replorigin_checkpoint"), "x", { mode: 0o600 });
    writeFileSync(path.join(template, "PGLITE_TEMPLATE_VERSION"), `${pgliteVersion()}\n`);

    chmodTree(template, 0o644, 0o755);
    expect(mode(path.join(template, "pg_logical"))).toBe(0o755);
    expect(mode(path.join(template, "pg_logical", "replorigin_checkpoint"))).toBe(0o644);

    const home = path.join(root, "home", "db");
    mkdirSync(path.dirname(home), { recursive: true });
    expect(seedFromTemplate(home, template)).toBe(true);
    expect(mode(home)).toBe(0o700);
    expect(mode(path.join(home, "pg_logical"))).toBe(0o700);
    expect(mode(path.join(home, "pg_logical", "replorigin_checkpoint"))).toBe(0o600);
    expect(mode(path.join(home, "PG_VERSION"))).toBe(0o600);
    // The template itself stays shareable.
    expect(mode(path.join(template, "PG_VERSION"))).toBe(0o644);
  });
});
