import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The version in Pulpitum's package.json, found upwards from this module (source or dist/). */
export function packageVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth++) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "pulpitum" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // not here; look one folder up
    }
    dir = path.dirname(dir);
  }
  return "unknown";
}
