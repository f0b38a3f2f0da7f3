/**
 * Lambda bundle sizes and cold-start cost of each function bundle that
 * `npm run synth` wrote, so a dependency upgrade is judged on what Lambda
 * loads rather than on what the test runner sees:
 *
 *   npm run synth && npx tsx bench/lambda-bundles.ts
 *   npx tsx bench/lambda-bundles.ts --runs 15 --cdk-out before/cdk.out --cdk-out cdk.out \
 *     [--node /path/to/node --node node_modules/.bin/node]
 *
 * For each AWS::Lambda::Function of the synthesized template it prints the
 * bundle's bytes (index.mjs, its source map, and parquet-wasm's binary for bundles built before issue 31 removed it), the
 * deflated size of the lot (about the deployment zip), and, over `--runs`
 * fresh processes started with the function's NODE_OPTIONS as Lambda starts
 * it, the median of:
 *
 * - import: loading the bundle (module evaluation, parquet-wasm (before issue 31)
 *   instantiation, Powertools and middy set-up), wall time and the CPU time
 *   it took (all threads; steadier than wall time on a busy machine);
 * - first call: the handler's first call with an event it rejects, which
 *   runs every middleware (injectLambdaContext, logMetrics) but opens no
 *   connection;
 * - RSS after that call, and the process's peak RSS (getrusage maxRSS).
 *
 * Several `--cdk-out` folders and `--node` binaries (default: the Node
 * running this script) are measured as every combination of the two, taking
 * turns run by run, so a busy machine slows every configuration alike.
 *
 * Figures are printed, never asserted.
 */
import { execFile } from "node:child_process";
import { readFile, readdir } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { deflateRawSync } from "node:zlib";

const execFileAsync = promisify(execFile);

interface LambdaResource {
  readonly Type: string;
  readonly Properties: {
    readonly Description?: string;
    readonly Code: { readonly S3Key: string };
    readonly Environment?: { readonly Variables?: Record<string, unknown> };
  };
}

/** An event each handler rejects after its middlewares ran, keyed by a word of its description. */
const REJECTED_EVENTS: ReadonlyArray<readonly [RegExp, string, unknown]> = [
  [/DLQ replay/i, "replay", { max_messages: -1 }],
  [/garbage collection/i, "gc", { dry_run: "yes" }],
  [/restore/i, "restore", { v: 1 }],
  [/discovery/i, "discover", { source: "aws.s3" }],
  [/worker/i, "worker", { hello: "world" }],
];

interface Sample {
  readonly importMs: number;
  readonly importCpuMs: number;
  readonly firstInvokeMs: number;
  readonly rssMb: number;
  readonly maxRssMb: number;
  readonly result: string;
}

function argValues(name: string, fallback: string): string[] {
  const values = process.argv.flatMap((a, i) =>
    a === name && process.argv[i + 1] !== undefined ? [process.argv[i + 1]!] : [],
  );
  return values.length > 0 ? values : [fallback];
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One fresh process: import the bundle, call its handler once, report the timings. */
async function sample(
  node: string,
  bundle: string,
  event: unknown,
  nodeOptions: string,
): Promise<Sample> {
  const script = `
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    const { handler } = await import(${JSON.stringify(pathToFileURL(bundle).href)});
    const imported = performance.now();
    const cpu = process.cpuUsage(cpuBefore);
    const context = { getRemainingTimeInMillis: () => 60000, functionName: "f", awsRequestId: "r-1", invokedFunctionArn: "arn", memoryLimitInMB: "1024", functionVersion: "1" };
    let result;
    try { await handler(${JSON.stringify(event)}, context); result = "accepted"; }
    catch (error) { result = error.name; }
    const invoked = performance.now();
    console.log(JSON.stringify({
      importMs: imported - started,
      importCpuMs: (cpu.user + cpu.system) / 1000,
      firstInvokeMs: invoked - imported,
      rssMb: process.memoryUsage().rss / 2 ** 20,
      maxRssMb: process.resourceUsage().maxRSS / 1024,
      result,
    }));`;
  const { stdout } = await execFileAsync(node, ["--input-type=module", "-e", script], {
    maxBuffer: 4 << 20,
    env: {
      PATH: process.env.PATH,
      NODE_OPTIONS: nodeOptions,
      POWERTOOLS_SERVICE_NAME: "pulpitum",
      AWS_REGION: "us-east-1",
    },
  });
  return JSON.parse(stdout.trim().split("\n").pop()!) as Sample;
}

interface Bundle {
  readonly name: string;
  readonly event: unknown;
  readonly dir: string;
  readonly nodeOptions: string;
}

/** The function bundles of one synthesized app, with the event each rejects. */
async function bundlesIn(cdkOut: string): Promise<Bundle[]> {
  const templateFile = (await readdir(cdkOut)).find((f) => f.endsWith(".template.json"));
  if (templateFile === undefined) {
    throw new Error(`no *.template.json in ${cdkOut}: run npm run synth first`);
  }
  const template = JSON.parse(await readFile(path.join(cdkOut, templateFile), "utf8")) as {
    Resources: Record<string, LambdaResource>;
  };
  return Object.values(template.Resources)
    .filter((r) => r.Type === "AWS::Lambda::Function" && r.Properties.Code?.S3Key?.endsWith(".zip"))
    .map((r) => {
      const description = r.Properties.Description ?? "";
      const match = REJECTED_EVENTS.find(([pattern]) => pattern.test(description));
      if (match === undefined) throw new Error(`no rejected event known for "${description}"`);
      const nodeOptions = r.Properties.Environment?.Variables?.NODE_OPTIONS;
      return {
        name: match[1],
        event: match[2],
        dir: path.join(cdkOut, `asset.${r.Properties.Code.S3Key.replace(/\.zip$/, "")}`),
        nodeOptions: typeof nodeOptions === "string" ? nodeOptions : "",
      };
    });
}

async function sizes(dir: string) {
  const files = await readdir(dir);
  const bytes = new Map<string, number>();
  let deflatedBytes = 0;
  for (const f of files) {
    const body = await readFile(path.join(dir, f));
    bytes.set(f, body.length);
    deflatedBytes += deflateRawSync(body, { level: 9 }).length;
  }
  return {
    indexBytes: bytes.get("index.mjs"),
    mapBytes: bytes.get("index.mjs.map"),
    wasmBytes: bytes.get("parquet_wasm_bg.wasm"),
    deflatedBytes,
  };
}

async function main(): Promise<void> {
  const runs = Number(argValues("--runs", "15")[0]);
  const cdkOuts = argValues("--cdk-out", "cdk.out").map((d) => path.resolve(d));
  const nodes = argValues("--node", process.execPath);
  const configs: Array<{ label: string; node: string; bundles: Bundle[] }> = [];
  for (const cdkOut of cdkOuts) {
    for (const node of nodes) {
      const { stdout } = await execFileAsync(node, ["--version"]);
      configs.push({
        label: `${path.relative(process.cwd(), cdkOut) || "."} on Node ${stdout.trim()}`,
        node,
        bundles: await bundlesIn(cdkOut),
      });
    }
  }
  const names = [...new Set(configs.flatMap((c) => c.bundles.map((b) => b.name)))];
  const samples = new Map<string, Sample[]>();
  const key = (config: number, name: string) => `${config}/${name}`;
  for (let run = 0; run < runs; run++) {
    for (const name of names) {
      for (const [i, config] of configs.entries()) {
        const bundle = config.bundles.find((b) => b.name === name);
        if (bundle === undefined) continue;
        const s = await sample(
          config.node,
          path.join(bundle.dir, "index.mjs"),
          bundle.event,
          bundle.nodeOptions,
        );
        samples.set(key(i, name), [...(samples.get(key(i, name)) ?? []), s]);
      }
    }
  }

  const results: Record<string, Record<string, unknown>> = {};
  const kib = (n: number | undefined) => (n === undefined ? "-" : (n / 1024).toFixed(0));
  console.log(`Lambda bundles, ${runs} cold processes each (medians; configurations take turns)`);
  for (const [i, config] of configs.entries()) {
    console.log(`\n${config.label}`);
    console.log(
      `${"function".padEnd(9)} ${"index.mjs KiB".padStart(13)} ${".map KiB".padStart(9)} ${"wasm KiB".padStart(9)} ${"deflated KiB".padStart(12)} ${"import ms".padStart(10)} ${"CPU ms".padStart(7)} ${"1st call ms".padStart(11)} ${"RSS MiB".padStart(8)} ${"maxRSS MiB".padStart(10)}  result`,
    );
    results[config.label] = {};
    for (const bundle of config.bundles) {
      const taken = samples.get(key(i, bundle.name)) ?? [];
      const row = {
        ...(await sizes(bundle.dir)),
        importMs: median(taken.map((s) => s.importMs)),
        importCpuMs: median(taken.map((s) => s.importCpuMs)),
        firstInvokeMs: median(taken.map((s) => s.firstInvokeMs)),
        rssMb: median(taken.map((s) => s.rssMb)),
        maxRssMb: median(taken.map((s) => s.maxRssMb)),
        result: [...new Set(taken.map((s) => s.result))].join(","),
      };
      results[config.label]![bundle.name] = row;
      console.log(
        `${bundle.name.padEnd(9)} ${kib(row.indexBytes).padStart(13)} ${kib(row.mapBytes).padStart(9)} ${kib(row.wasmBytes).padStart(9)} ${kib(row.deflatedBytes).padStart(12)} ${row.importMs.toFixed(1).padStart(10)} ${row.importCpuMs.toFixed(0).padStart(7)} ${row.firstInvokeMs.toFixed(1).padStart(11)} ${row.rssMb.toFixed(1).padStart(8)} ${row.maxRssMb.toFixed(1).padStart(10)}  ${row.result}`,
      );
    }
  }
  console.log(`\n${JSON.stringify({ runs, results })}`);
}

await main();
