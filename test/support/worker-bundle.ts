/**
 * Checks on a bundled worker-thread entry (infra/worker-entries.ts): it must
 * run where nothing but the bundle is, so it may import Node's builtins only,
 * and it must load in a worker thread. Shared by the Lambda asset test and
 * the bench's bundled children.
 */
import { execFile } from "node:child_process";
import { isBuiltin } from "node:module";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { build } from "esbuild";

const execFileAsync = promisify(execFile);

/** What `file` imports that is not a Node builtin (static, dynamic or require), read from esbuild's metafile. */
export async function nonBuiltinImports(file: string): Promise<string[]> {
  const { metafile } = await build({
    entryPoints: [file],
    bundle: true,
    packages: "external",
    platform: "node",
    format: "esm",
    write: false,
    metafile: true,
    logLevel: "silent",
  });
  return Object.values(metafile.inputs)
    .flatMap((input) => input.imports.map((i) => i.path))
    .filter((specifier) => !isBuiltin(specifier));
}

/**
 * Each file imported by a worker thread of a plain Node process (not the
 * test runner's module transform), one at a time: "loaded" once its module
 * has run, or "failed: " and why. A Worker started on the file itself gives
 * no signal that its module has run, hence the importing thread.
 */
export async function loadInWorkerThreads(files: readonly string[]): Promise<string[]> {
  const urls = files.map((file) => pathToFileURL(file).href);
  const script = `
    import { Worker } from "node:worker_threads";
    for (const url of ${JSON.stringify(urls)}) {
      const loader = new Worker(
        \`import("node:worker_threads").then(({ parentPort }) =>
          import(\${JSON.stringify(url)}).then(
            () => parentPort.postMessage("loaded"),
            (error) => parentPort.postMessage("failed: " + error.message)))\`,
        { eval: true },
      );
      console.log(await new Promise((resolve) => loader.once("message", resolve)));
      await loader.terminate();
    }`;
  const { stdout } = await execFileAsync(process.execPath, ["--input-type=module", "-e", script], {
    env: { PATH: process.env.PATH },
    timeout: 30_000,
  });
  return stdout.trim().split("\n");
}
