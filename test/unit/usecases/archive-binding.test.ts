/**
 * The archive a database belongs to names its S3 service (issue 49 §5), on
 * PGlite and the file store (standing in for one service's bucket): a
 * same-named bucket on another service is refused, a binding recorded
 * before the service was named keeps working and is upgraded in place by
 * the first process that may write it, and `rebind-archive` refuses a
 * `--from` that is not the binding even when the database is bound to the
 * target already.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { SqlArchiveBinding } from "../../../src/adapters/sql/archive-binding.js";
import { ARCHIVE_BINDING_TABLE } from "../../../src/adapters/sql/migrations.js";
import type { SqlHotStore } from "../../../src/adapters/sql/sql-hot-store.js";
import { parseConfig } from "../../../src/config/config.js";
import { parseTableId } from "../../../src/domain/table.js";
import { ArchiveMismatchError } from "../../../src/errors.js";
import { archiveInUse } from "../../../src/open-adapters.js";
import type { ArchiveBinding } from "../../../src/ports/archive-binding.js";
import {
  rebindArchive,
  requireArchiveBinding,
  type ArchiveBindingPorts,
  type ArchiveInUse,
} from "../../../src/usecases/archive-binding.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { chatRecords, converge, harnessOn, seedTable } from "../../support/workflow-harness.js";

const NOW = new Date("2026-06-01T00:00:00Z");
const LEGACY = "s3://archive-a/archive";

/** The archive a process configured with `settings` names (the same bucket and prefix on every service). */
function archiveOn(settings: Record<string, string>): ArchiveInUse {
  const env = {
    DATABASE_URL: "postgresql://pulpitum@127.0.0.1:5432/app",
    PULPITUM_ARCHIVE_URL: "s3://archive-a/archive",
    ...settings,
  };
  return archiveInUse(parseConfig(env, { cwd: "/tmp" }));
}
const MINIO = archiveOn({ AWS_ENDPOINT_URL: "https://minio.example.net:9000" });
const R2 = archiveOn({ AWS_ENDPOINT_URL_S3: "https://0123abcd.r2.cloudflarestorage.com" });
const EMULATOR = archiveOn({ AWS_ENDPOINT_URL: "http://127.0.0.1:4566" });
const AWS = archiveOn({ AWS_REGION: "eu-west-1" });

describe("the archive a database belongs to names its S3 service", () => {
  let dirs: string[];
  let store: SqlHotStore;
  let binding: SqlArchiveBinding;
  /** The file store of one service's bucket, holding `chat`'s two buckets archived under `archive/`. */
  let archived: FileObjectStore;

  /** An empty bucket of a service: a file store of its own. */
  const emptyBucket = () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-binding-"));
    dirs.push(dir);
    return new FileObjectStore(dir);
  };

  beforeAll(async () => {
    dirs = [];
    store = await freshPgliteHotStore();
    binding = new SqlArchiveBinding(store.db);
    const h = harnessOn(store, emptyBucket());
    const expected = await seedTable(
      h,
      parseTableId("chat"),
      "CalendarMonthUtc",
      "json",
      chatRecords([1, 2], 3, ["\u0000long-and-odd key ".repeat(12)]),
    );
    await converge(h, expected);
    archived = h.objects;
  });
  beforeEach(async () => {
    await store.db.write(`DELETE FROM ${ARCHIVE_BINDING_TABLE}`, [], "forgetBinding");
  });
  afterAll(async () => {
    await store.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  const ports = (
    objects: FileObjectStore,
    port: ArchiveBinding = binding,
  ): ArchiveBindingPorts => ({
    binding: port,
    hotStore: store,
    objectStore: objects,
  });

  it("gives the same bucket and prefix on AWS, MinIO, R2 and an emulator four identities", () => {
    // Assess
    const identities = [AWS, MINIO, R2, EMULATOR].map((a) => a.identity);
    expect(new Set(identities).size).toBe(4);
    expect(identities).toEqual([
      "arn:aws:s3:::archive-a/archive",
      "https://minio.example.net:9000/archive-a/archive",
      "https://0123abcd.r2.cloudflarestorage.com/archive-a/archive",
      "http://127.0.0.1:4566/archive-a/archive",
    ]);
    for (const archive of [AWS, MINIO, R2, EMULATOR]) expect(archive.legacyIdentity).toBe(LEGACY);
  });

  it("a database bound to one S3 service refuses a same-named bucket on another, naming both, whether the process may write the binding or not", async () => {
    // Prepare: the other service's bucket even holds a copy of every object.
    await requireArchiveBinding(ports(archived), MINIO, NOW, { bind: true });

    // Act
    const refusals = await Promise.all(
      [R2, EMULATOR, AWS].flatMap((other) =>
        [true, false].map((bind) =>
          requireArchiveBinding(ports(archived), other, NOW, { bind }).then(
            () => undefined,
            (error: unknown) => error,
          ),
        ),
      ),
    );

    // Assess
    for (const refusal of refusals) {
      expect(refusal).toBeInstanceOf(ArchiveMismatchError);
      expect((refusal as Error).message).toContain(`belongs to the archive ${MINIO.identity}`);
      expect((refusal as Error).message).toContain(`rebind-archive --from ${MINIO.identity} --yes`);
    }
    expect((refusals[0] as Error).message).toContain(`names ${R2.identity}`);
    expect((await binding.read())?.archive).toBe(MINIO.identity);
  });

  it("a binding recorded without its service keeps working for a reader, which writes nothing, and is upgraded in place by the first process that may write it", async () => {
    // Prepare
    await binding.bind(LEGACY, new Date("2026-01-01T00:00:00Z"));

    // Act
    const read = await requireArchiveBinding(ports(archived), EMULATOR, NOW, { bind: false });
    const afterReader = await binding.read();
    const written = await requireArchiveBinding(ports(archived), EMULATOR, NOW, { bind: true });
    const refused = requireArchiveBinding(ports(archived), MINIO, NOW, { bind: true });

    // Assess
    expect(read?.archive).toBe(LEGACY);
    expect(afterReader?.archive).toBe(LEGACY);
    expect(written).toEqual({ archive: EMULATOR.identity, boundAt: NOW });
    await expect(refused).rejects.toThrow(ArchiveMismatchError);
    expect((await binding.read())?.archive).toBe(EMULATOR.identity);
  });

  it("a binding recorded without its service is refused for a same-named bucket that does not hold the database's manifests, and stays as it was", async () => {
    // Prepare
    await binding.bind(LEGACY, NOW);
    const otherService = emptyBucket();

    // Act
    const results = await Promise.allSettled(
      [true, false].map((bind) => requireArchiveBinding(ports(otherService), R2, NOW, { bind })),
    );

    // Assess
    for (const result of results) {
      expect(result.status).toBe("rejected");
      const reason = (result as PromiseRejectedResult).reason as Error;
      expect(reason).toBeInstanceOf(ArchiveMismatchError);
      expect(reason.message).toMatch(/does not hold this database's archive: bucket chat\//);
    }
    expect((await binding.read())?.archive).toBe(LEGACY);
  });

  it("two processes on different services upgrading one binding without its service at once: one wins, the other is refused", async () => {
    // Prepare: both buckets hold the database's manifests (a replica), so the manifest check cannot tell them apart.
    await binding.bind(LEGACY, NOW);

    // Act
    const results = await Promise.allSettled([
      requireArchiveBinding(ports(archived), MINIO, NOW, { bind: true }),
      requireArchiveBinding(ports(archived), R2, NOW, { bind: true }),
    ]);

    // Assess
    const won = results.filter((r) => r.status === "fulfilled");
    const lost = results.filter((r) => r.status === "rejected");
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect((lost[0] as PromiseRejectedResult).reason).toBeInstanceOf(ArchiveMismatchError);
    const winner = (won[0] as PromiseFulfilledResult<{ archive: string }>).value.archive;
    expect([MINIO.identity, R2.identity]).toContain(winner);
    expect((await binding.read())?.archive).toBe(winner);
  });

  it("an upgrade whose write fails leaves the binding without its service as it was, and the next process upgrades it", async () => {
    // Prepare
    await binding.bind(LEGACY, NOW);
    const failing: ArchiveBinding = {
      read: () => binding.read(),
      bind: (archive, now) => binding.bind(archive, now),
      rebind: () => Promise.reject(new Error("connection reset during the upgrade")),
    };

    // Act
    const failed = requireArchiveBinding(ports(archived, failing), AWS, NOW, { bind: true });
    await expect(failed).rejects.toThrow("connection reset during the upgrade");
    const between = await binding.read();
    const next = await requireArchiveBinding(ports(archived), AWS, NOW, { bind: true });

    // Assess
    expect(between?.archive).toBe(LEGACY);
    expect(next?.archive).toBe(AWS.identity);
  });

  describe("rebind-archive refuses a --from that is not the binding", () => {
    const rebind = (from: string, to: ArchiveInUse) =>
      rebindArchive(ports(archived), from, to, NOW);

    it("on a database bound to the target already, refuses a wrong --from, naming the binding, and changes nothing", async () => {
      // Prepare
      const recorded = await binding.bind(EMULATOR.identity, new Date("2026-01-01T00:00:00Z"));

      // Act
      const refused = rebind("s3://wrong-bucket/elsewhere", EMULATOR);

      // Assess
      await expect(refused).rejects.toThrow(ArchiveMismatchError);
      await expect(refused).rejects.toThrow(
        `this database belongs to the archive ${EMULATOR.identity} (the archive PULPITUM_ARCHIVE_URL`,
      );
      expect(await binding.read()).toEqual(recorded);
    });

    it("with --from naming the binding, which is the target already, changes nothing and succeeds", async () => {
      // Prepare
      const recorded = await binding.bind(EMULATOR.identity, new Date("2026-01-01T00:00:00Z"));

      // Act
      const kept = await rebind(EMULATOR.identity, EMULATOR);

      // Assess
      expect(kept).toEqual(recorded);
      expect(await binding.read()).toEqual(recorded);
    });

    it("moves a binding recorded without its service to the full identity when --from names it as recorded", async () => {
      // Prepare
      await binding.bind(LEGACY, new Date("2026-01-01T00:00:00Z"));

      // Act
      const wrong = await rebind(AWS.identity, AWS).catch((error: unknown) => error);
      const moved = await rebind(LEGACY, AWS);

      // Assess
      expect(wrong).toBeInstanceOf(ArchiveMismatchError);
      expect((wrong as Error).message).toContain(
        `belongs to the archive ${LEGACY}, not to ${AWS.identity}`,
      );
      expect(moved).toEqual({ archive: AWS.identity, boundAt: NOW });
    });
  });
});
