/**
 * A warm container follows a rotation of the database secret: the runtime is
 * reopened once the secret's value changed, never more often than the
 * refresh interval asks, and a secret that cannot be read keeps the runtime
 * that works.
 */
import { describe, expect, it } from "vitest";
import { cachedPerSecret } from "../../../functions/open-adapters.js";
import { parseFunctionSettings } from "../../../src/config/function-settings.js";
import { ConfigError } from "../../../src/errors.js";

function world() {
  let now = 0;
  let version: string | undefined = "v1";
  let secretFails = false;
  let reads = 0;
  const opened: Array<{ id: number; version: string | undefined; closed: boolean }> = [];
  const get = cachedPerSecret(
    async () => {
      const runtime = {
        id: opened.length + 1,
        version,
        closed: false,
        async close() {
          runtime.closed = true;
        },
      };
      opened.push(runtime);
      return runtime;
    },
    async () => {
      reads++;
      if (secretFails) throw new Error("AccessDenied");
      return version;
    },
    { refreshMs: 60_000, now: () => now },
  );
  return {
    get,
    opened,
    advance: (ms: number) => (now += ms),
    rotate: (v: string) => (version = v),
    failSecret: (fails: boolean) => (secretFails = fails),
    reads: () => reads,
  };
}

describe("the runtime of a warm container", () => {
  it("is reopened on the new credentials at the first invocation a refresh interval after a rotation, closing the old one", async () => {
    const w = world();
    const first = await w.get();
    w.rotate("v2");
    w.advance(59_999);
    expect(await w.get()).toBe(first);

    w.advance(1);
    const second = await w.get();

    expect(second).not.toBe(first);
    expect(second.version).toBe("v2");
    expect(first.closed).toBe(true);
    w.advance(60_000);
    expect(await w.get()).toBe(second);
    expect(w.opened).toHaveLength(2);
  });

  it("reads the secret at most once per refresh interval, however many invocations run", async () => {
    const w = world();
    for (let i = 0; i < 10; i++) {
      await w.get();
      w.advance(10_000);
    }
    expect(w.reads()).toBe(2);
  });

  it("keeps the runtime it has when the secret cannot be read, and asks again an interval later", async () => {
    const w = world();
    const first = await w.get();
    w.failSecret(true);
    w.rotate("v2");
    w.advance(60_000);
    expect(await w.get()).toBe(first);
    w.failSecret(false);
    w.advance(60_000);
    expect((await w.get()).version).toBe("v2");
  });

  it("fails the first invocation when the secret cannot be read, and tries again at the next", async () => {
    const w = world();
    w.failSecret(true);
    await expect(w.get()).rejects.toThrow("AccessDenied");
    w.failSecret(false);
    expect((await w.get()).version).toBe("v1");
  });
});

describe("function settings", () => {
  it("bounds a container's pool to two connections, naming the variable and the range", () => {
    expect(parseFunctionSettings({})).toEqual({ poolMax: 2, secretRefreshMs: 60_000 });
    expect(() => parseFunctionSettings({ PULPITUM_DB_POOL_MAX: "3" })).toThrow(ConfigError);
    expect(() => parseFunctionSettings({ PULPITUM_DB_POOL_MAX: "3" })).toThrow(
      /PULPITUM_DB_POOL_MAX="3" is invalid: an integer from 1 to 2/,
    );
  });
});
