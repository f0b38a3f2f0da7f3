import { describe, expect, it } from "vitest";
import {
  CONFIG_VARIABLES,
  GC_DEFAULT_MIN_AGE_SECONDS,
  parseConfig,
} from "../../../src/config/config.js";
import { ConfigError } from "../../../src/errors.js";

const parse = (env: Record<string, string>) => parseConfig(env, { cwd: "/srv/app" });

describe("ARCHIVER_GC_MIN_AGE_SECONDS", () => {
  it("defaults to 24 hours and is documented with the other variables", () => {
    expect(parse({}).gcMinAgeSeconds).toBe(GC_DEFAULT_MIN_AGE_SECONDS);
    expect(GC_DEFAULT_MIN_AGE_SECONDS).toBe(86_400);
    expect(CONFIG_VARIABLES.map((v) => v.name)).toContain("ARCHIVER_GC_MIN_AGE_SECONDS");
  });

  it.each(["3600", "172800", "31536000"])("accepts %s seconds", (value) => {
    expect(parse({ ARCHIVER_GC_MIN_AGE_SECONDS: value }).gcMinAgeSeconds).toBe(Number(value));
  });

  it.each(["0", "3599", "-1", "1.5", "1d", "31536001"])(
    "refuses %s, naming the variable and the accepted range",
    (value) => {
      const error = (() => {
        try {
          parse({ ARCHIVER_GC_MIN_AGE_SECONDS: value });
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toBe(
        `ARCHIVER_GC_MIN_AGE_SECONDS=${JSON.stringify(value)} is invalid: an integer from 3600 to 31536000`,
      );
    },
  );
});
