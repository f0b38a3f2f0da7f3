/**
 * The commands a documentation page shows, as the shell would split them:
 * every line of a `sh` block, the `$ ` lines and the lines that start with
 * `pulpitum`, `npx` or `npm` of an untagged block, and the inline code spans
 * that start with `npx` or `npm` (their `[optional]` parts left out). Quotes
 * may span lines, `\` continues a line, `#` starts a comment, `&&`, `||`,
 * `;` and `|` separate commands, redirections are not words (a `> FILE`
 * and a here-document are kept beside the command's words).
 */
import { codeBlocks } from "./markdown.js";

export interface DocCommand {
  readonly file: string;
  /** The 1-based line the command starts on. */
  readonly line: number;
  /** The command as the page shows it (its first line). */
  readonly source: string;
  /** Leading `NAME=value` assignments. */
  readonly env: Readonly<Record<string, string>>;
  /** The words after the assignments, quotes removed. */
  readonly words: readonly string[];
  /** Whether the command came from an inline code span rather than a block. */
  readonly inline: boolean;
}

const SHELL_BLOCKS = new Set(["sh", "bash", "shell", "console"]);
const COMMAND_WORDS = /^(\$ |pulpitum |npx |npm )/;

/** One command of shell text: its words, the line it starts on, and what it redirects. */
export interface ShellCommand {
  readonly offset: number;
  readonly words: string[];
  /** The file its stdout goes to (`> FILE`), if any. */
  readonly output?: string;
  /** The text of its here-document (`<<'EOF'` … `EOF`), if any. */
  readonly heredoc?: string;
}

/** Split shell text into commands: each a list of words with its starting line offset. */
export function splitShell(text: string): ShellCommand[] {
  const commands: ShellCommand[] = [];
  let words: string[] = [];
  let word: string | null = null;
  let line = 0;
  let start = 0;
  let redirect: "in" | "out" | null = null;
  let output: string | undefined;
  let heredocEnd: string | undefined;
  const endWord = () => {
    if (word === null) return;
    if (redirect !== null) {
      if (redirect === "out") output = word;
      redirect = null;
    } else {
      if (words.length === 0) start = line;
      words.push(word);
    }
    word = null;
  };
  const endCommand = (heredoc?: string) => {
    endWord();
    if (words.length > 0)
      commands.push({
        offset: start,
        words,
        ...(output === undefined ? {} : { output }),
        ...(heredoc === undefined ? {} : { heredoc }),
      });
    words = [];
    output = undefined;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\\" && text[i + 1] === "\n") {
      i++;
      line++;
    } else if (c === "\n" && heredocEnd !== undefined) {
      // The here-document's lines, up to its delimiter alone on a line.
      const bodyLines: string[] = [];
      let at = i + 1;
      for (;;) {
        const next = text.indexOf("\n", at);
        const current = text.slice(at, next < 0 ? text.length : next);
        if (current === heredocEnd) {
          i = next < 0 ? text.length : next;
          break;
        }
        if (next < 0) throw new Error(`a here-document without its ${heredocEnd} line in: ${text}`);
        bodyLines.push(current);
        at = next + 1;
      }
      endCommand(bodyLines.map((l) => `${l}\n`).join(""));
      line += bodyLines.length + 2;
      heredocEnd = undefined;
    } else if (c === "<" && text[i + 1] === "<" && word === null) {
      const delimiter = /^<<-?\s*(?:'([^']+)'|"([^"]+)"|(\w+))/.exec(text.slice(i));
      if (delimiter === null) throw new Error(`an unreadable here-document in: ${text}`);
      heredocEnd = delimiter[1] ?? delimiter[2] ?? delimiter[3];
      i += delimiter[0].length - 1;
    } else if (c === "\n" || c === ";") {
      endCommand();
      if (c === "\n") line++;
    } else if (c === "&" || c === "|") {
      if (text[i + 1] === c) i++;
      endCommand();
    } else if (c === " " || c === "\t") {
      endWord();
    } else if (c === "#" && word === null) {
      while (i + 1 < text.length && text[i + 1] !== "\n") i++;
    } else if ((c === ">" || c === "<") && (word === null || /^\d$/.test(word))) {
      // `2>` redirects stderr: dropped; `>` and `>>` name the command's output.
      redirect = c === ">" && word === null ? "out" : "in";
      word = null;
      if (text[i + 1] === c) i++;
    } else if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1);
      if (end < 0) throw new Error(`an unclosed ${c} in: ${text}`);
      const quoted = text.slice(i + 1, end);
      line += quoted.split("\n").length - 1;
      word = (word ?? "") + quoted;
      i = end;
    } else {
      word = (word ?? "") + c;
    }
  }
  endCommand();
  return commands;
}

function toCommand(
  file: string,
  line: number,
  source: string,
  words: string[],
  inline: boolean,
): DocCommand {
  const env: Record<string, string> = {};
  let first = 0;
  while (first < words.length && /^[A-Z_][A-Z0-9_]*=/.test(words[first]!)) {
    const [name, ...value] = words[first]!.split("=");
    env[name!] = value.join("=");
    first++;
  }
  return { file, line, source, env, words: words.slice(first), inline };
}

/** Every command a documentation page shows. */
export function docCommands(file: string, markdown: string): DocCommand[] {
  const commands: DocCommand[] = [];
  for (const block of codeBlocks(markdown)) {
    const lines = block.text.split("\n");
    let text: string;
    if (SHELL_BLOCKS.has(block.lang)) text = block.text;
    else if (block.lang === "")
      text = lines.map((l) => (COMMAND_WORDS.test(l) ? l.replace(/^\$ /, "") : "")).join("\n");
    else continue;
    for (const { offset, words } of splitShell(text))
      commands.push(toCommand(file, block.line + 1 + offset, lines[offset]!.trim(), words, false));
  }
  const outsideBlocks = markdown.replace(/^```[\s\S]*?^```/gm, (b) => b.replace(/[^\n]/g, ""));
  outsideBlocks.split("\n").forEach((text, index) => {
    for (const span of text.matchAll(/`((?:npx|npm) [^`]*)`/g)) {
      const synopsis = span[1]!.replace(/\s*\[[^\]]*\]/g, "");
      for (const { words } of splitShell(synopsis))
        commands.push(toCommand(file, index + 1, span[1]!, words, true));
    }
  });
  return commands;
}

/** The arguments of `pulpitum` a documented command runs, or null when it does not run it. */
export function pulpitumArguments(words: readonly string[]): string[] | null {
  if (words[0] === "pulpitum") return words.slice(1);
  if (words[0] === "npx" && words[1] === "pulpitum") return words.slice(2);
  if (words[0] === "npm" && words[1] === "start") {
    const separator = words.indexOf("--");
    return ["start", ...(separator < 0 ? [] : words.slice(separator + 1))];
  }
  return null;
}
