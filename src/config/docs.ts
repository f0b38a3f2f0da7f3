/**
 * The configuration variables as documentation: the configuration table of
 * docs/configuration.md (written by `npm run docs:config`) and the `pulpitum --help`
 * section, both drawn from the variable tables so they cannot drift from
 * what the parsers accept.
 */
import { CONFIG_VARIABLES } from "./table.js";
import { OBSOLETE_VARIABLES } from "./config.js";
import { OTHER_VARIABLES } from "./unknown-variables.js";
import { DISCOVERY_VARIABLES } from "./discovery-settings.js";
import { FUNCTION_VARIABLES } from "./function-settings.js";
import { defaultText } from "./variables.js";

/** Variables read outside the parsers that the configuration table lists, with their defaults. */
const LOGGING_DEFAULTS: Readonly<Record<string, string>> = {
  PULPITUM_LOG: "warnings and errors only",
  PULPITUM_DEBUG: "unset",
};

/** The configuration table of docs/configuration.md, one row of cells (variable, default, rule) per line. */
export function configTableRows(): string[][] {
  const code = (name: string) => `\`${name}\``;
  return [
    ...[...CONFIG_VARIABLES, ...DISCOVERY_VARIABLES, ...FUNCTION_VARIABLES].map((v) => [
      code(v.name),
      defaultText(v),
      v.rule,
    ]),
    ...OTHER_VARIABLES.filter((v) => v.name in LOGGING_DEFAULTS).map((v) => [
      code(v.name),
      LOGGING_DEFAULTS[v.name]!,
      v.rule,
    ]),
    [
      Object.keys(OBSOLETE_VARIABLES).map(code).join(", "),
      "",
      "obsolete: refused, naming `ARCHIVER_ELIGIBLE_BEFORE`",
    ],
  ];
}

/** The configuration table as Markdown (prettier aligns the columns). */
export function configTableMarkdown(): string {
  const line = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
  return [
    line(["variable", "default", "rule"]),
    line(["---", "---", "---"]),
    ...configTableRows().map(line),
  ].join("\n");
}

/** The `Configuration` lines of `pulpitum --help`: every variable the CLI reads, with its default. */
export function configHelpLines(): string[] {
  const plain = (text: string) => text.replaceAll("`", "");
  return [
    ...CONFIG_VARIABLES.map((v) => `  ${v.name.padEnd(38)} default ${plain(defaultText(v))}`),
    ...OTHER_VARIABLES.filter((v) => v.name === "PULPITUM_LOG").map(
      (v) => `  ${v.name.padEnd(38)} ${v.rule}`,
    ),
  ];
}
