import js from "@eslint/js";
import tseslint from "typescript-eslint";

/**
 * The layers, lowest first: the kernel (errors, input, config/variables,
 * file-read) -> domain -> ports -> adapters | archive -> usecases | read ->
 * runner -> cli | functions -> infra. A module imports only from its own
 * layer or below; use cases and readers import no adapter (they get ports);
 * nothing under src imports the Lambda handlers or the stack. `open-adapters`
 * and the configuration (src/config/) are the composition root's, used from
 * cli and functions (adapters and use cases may read the configuration's types
 * and defaults; only cli and functions its docs).
 */
const dirs = (...names) => ({
  regex: `^\\.{1,2}/(\\.\\./)*(${names.join("|")})/`,
  message: "imports across a layer boundary (see the layers at the top of eslint.config.js)",
});
const modules = (...names) => ({
  regex: `^\\.{1,2}/(\\.\\./)*(${names.join("|")})\\.js$`,
  message: "imports across a layer boundary (see the layers at the top of eslint.config.js)",
});
const composition = modules("open-adapters", "config/docs");
// every module of src/config/ but the kernel's variables.ts
const settings = {
  regex: `^\\.{1,2}/(\\.\\./)*config/(?!variables\\.js$)`,
  message: composition.message,
};
const kernel = [
  dirs("domain", "ports", "adapters", "archive", "usecases", "read", "runner", "cli"),
  composition,
  settings,
];
const kernelFiles = ["src/errors.ts", "src/input.ts", "src/file-read.ts"];
const layers = [
  [kernelFiles, kernel],
  // the kernel's module inside src/config/: none of its siblings either
  [["src/config/variables.ts"], [...kernel, { regex: "^\\./", message: composition.message }]],
  [
    ["src/domain/**/*.ts"],
    [
      dirs("ports", "adapters", "archive", "usecases", "read", "runner", "cli"),
      composition,
      settings,
    ],
  ],
  [
    ["src/ports/**/*.ts"],
    [dirs("adapters", "archive", "usecases", "read", "runner", "cli"), composition, settings],
  ],
  [["src/adapters/**/*.ts"], [dirs("archive", "usecases", "read", "runner", "cli"), composition]],
  [
    ["src/archive/**/*.ts"],
    [dirs("adapters", "usecases", "read", "runner", "cli"), composition, settings],
  ],
  [["src/usecases/**/*.ts"], [dirs("adapters", "read", "runner", "cli"), composition]],
  [["src/read/**/*.ts"], [dirs("adapters", "runner", "cli"), composition]],
  [["src/runner/**/*.ts"], [dirs("cli"), composition]],
  [["src/*.ts", "src/config/*.ts"], []],
  [["functions/**/*.ts"], [dirs("cli", "infra")]],
].map(([files, patterns]) =>
  files[0].startsWith("src/")
    ? [files, [...patterns, dirs("functions", "infra")]]
    : [files, patterns],
);

export default tseslint.config(
  {
    // test/fixtures: data captured from old versions, and the scripts that
    // captured it, which run inside that version's checkout.
    ignores: [
      "dist/**",
      "cdk.out/**",
      "node_modules/**",
      ".pulpitum/**",
      "coverage/**",
      "bin/**",
      "test/fixtures/**",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_" },
      ],
      "@typescript-eslint/consistent-type-imports": "error",
      "no-console": "off",
    },
  },
  ...layers.map(([files, patterns]) => ({
    files,
    // each file matches one entry: a later entry's options would replace an earlier one's
    ignores: files[0] === "src/*.ts" ? [...kernelFiles, "src/config/variables.ts"] : [],
    rules: { "no-restricted-imports": ["error", { patterns }] },
  })),
  {
    // Files and functions a reader can hold (issue 30): tests and benches are exempt.
    files: ["src/**/*.ts", "functions/**/*.ts", "infra/**/*.ts"],
    rules: {
      "max-lines": ["error", { max: 500 }],
      "max-lines-per-function": ["error", { max: 120 }],
    },
  },
  {
    files: ["**/*.ts"],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
    },
  },
);
