/**
 * The allowlist check of `pulpitum query`: whether DuckDB's parse of the SQL
 * (the JSON `json_serialize_sql` makes of it) calls, reads or holds only
 * what read/query-allowlist.ts lists. It decides from the parse alone,
 * before anything is bound or run, and denies by default:
 *
 * - every function call (a FUNCTION or WINDOW node, an operator, a method
 *   call `x.upper()`, a bare name the binder turns into a call such as
 *   `current_user`) must name a listed function, unqualified or in `main`;
 * - every table function in a FROM must be a listed one;
 * - every table a FROM names must be the table's view or a CTE of the query
 *   in scope at that point (a CTE is in scope in its own WITH's body, in
 *   itself and in the CTEs after it: DuckDB resolves a name used before its
 *   CTE as a catalog table, so `WITH a AS (FROM duckdb_settings), duckdb_settings AS (…)`
 *   must not pass);
 * - a DESCRIBE, SUMMARIZE or SHOW must be of a query (`SHOW TABLES`, `SHOW
 *   databases` and the like list the engine, not the data);
 * - every node must be of a kind this check knows: an expression class, a
 *   query node, a table reference or a modifier DuckDB adds in a later
 *   version is refused until it is reviewed here, as are parameters
 *   (`$1`, `?`: nothing binds them), DEFAULT and time travel (`AT (…)`).
 *
 * Statements other than queries never reach it: `json_serialize_sql`
 * serializes SELECT statements only (read/query-statements.ts).
 */
import { QUERY_FUNCTIONS, QUERY_TABLE_FUNCTIONS, VALUE_FUNCTION_NAMES } from "./query-allowlist.js";

/** Why the SQL is refused: the thing it calls or reads, and the sentence that says so. */
export interface QueryRefusal {
  readonly name: string;
  readonly reason: string;
}

const EXPRESSION_CLASSES = new Set([
  "BETWEEN",
  "CASE",
  "CAST",
  "COLLATE",
  "COLUMN_REF",
  "COMPARISON",
  "CONJUNCTION",
  "CONSTANT",
  "FUNCTION",
  "LAMBDA",
  "LAMBDA_REF",
  "OPERATOR",
  "POSITIONAL_REFERENCE",
  "STAR",
  "SUBQUERY",
  "WINDOW",
]);

/** Every other node DuckDB serializes with a string `type`: query nodes, table references, modifiers, orders. */
const NODE_TYPES = new Set([
  "SELECT_NODE",
  "SET_OPERATION_NODE",
  "RECURSIVE_CTE_NODE",
  "CTE_NODE",
  "BASE_TABLE",
  "JOIN",
  "SUBQUERY",
  "TABLE_FUNCTION",
  "EXPRESSION_LIST",
  "EMPTY",
  "PIVOT",
  "SHOW_REF",
  "ORDER_MODIFIER",
  "LIMIT_MODIFIER",
  "LIMIT_PERCENT_MODIFIER",
  "DISTINCT_MODIFIER",
  "ORDER_DEFAULT",
  "ASCENDING",
  "DESCENDING",
]);

type Json = unknown;
type Node = Record<string, Json>;

const isNode = (value: Json): value is Node =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const text = (value: Json) => (typeof value === "string" ? value : "");
const lower = (value: Json) => text(value).toLowerCase();

/** Names in scope at a point of the query: the view's, then each enclosing WITH's. */
interface Scope {
  readonly names: ReadonlySet<string>;
  readonly outer: Scope | null;
}

const inScope = (scope: Scope | null, name: string): boolean =>
  scope !== null && (scope.names.has(name) || inScope(scope.outer, name));

class Refused extends Error {
  constructor(readonly refusal: QueryRefusal) {
    super(refusal.reason);
  }
}

const refuse = (name: string, reason: string): never => {
  throw new Refused({ name, reason });
};

/**
 * A function named in a call must be a listed one. A scalar call may be
 * qualified by one name: DuckDB reads `value.octet_length()` as a method
 * call on the column `value` (or, for a schema's name, as that schema's
 * function, and no schema holds another function of a listed name). A
 * catalog, or a schema on a table function, is refused.
 */
function checkFunction(node: Node, listed: ReadonlySet<string>, kind: string): void {
  const name = lower(node.function_name);
  const schema = lower(node.schema);
  const catalog = lower(node.catalog);
  const shown = [catalog, schema, name].filter((part) => part !== "").join(".");
  const table = listed === QUERY_TABLE_FUNCTIONS;
  if (catalog !== "" || (table && schema !== "" && schema !== "main")) {
    refuse(
      shown,
      `calls ${kind} ${shown}, qualified by a ${table ? "schema or " : ""}catalog, which pulpitum query refuses`,
    );
  }
  if (!listed.has(name)) {
    const tables =
      listed === QUERY_TABLE_FUNCTIONS
        ? `; the table functions it allows: ${[...listed].join(", ")}`
        : "";
    refuse(
      name,
      `calls ${kind} ${name}, which is not on pulpitum query's allowlist (docs/reading.md lists what a query may call${tables})`,
    );
  }
}

function checkTable(node: Node, view: string, scope: Scope | null): void {
  const name = lower(node.table_name);
  const schema = lower(node.schema_name);
  const catalog = lower(node.catalog_name);
  const shown = [catalog, schema, name].filter((part) => part !== "").join(".");
  if (node.at_clause !== null && node.at_clause !== undefined) {
    refuse(shown, `reads ${shown} at a version (AT …), which pulpitum query refuses`);
  }
  const qualified = (schema !== "" && schema !== "main") || catalog !== "";
  if (qualified || (name !== view && !inScope(scope, name))) {
    refuse(
      shown,
      `reads ${JSON.stringify(shown)}, which is not a table here: the SQL sees only the table's view ` +
        `${JSON.stringify(view)} and the CTEs it defines (WITH name AS (…))`,
    );
  }
}

/** The names a WITH defines, in order. */
function cteEntries(node: Node): { name: string; body: Json }[] {
  const map = isNode(node.cte_map) ? node.cte_map.map : undefined;
  if (!Array.isArray(map)) return [];
  return map.map((entry: Json) =>
    isNode(entry) ? { name: lower(entry.key), body: entry.value } : { name: "", body: entry },
  );
}

function visit(value: Json, view: string, scope: Scope | null): void {
  if (Array.isArray(value)) {
    for (const item of value) visit(item, view, scope);
    return;
  }
  if (!isNode(value)) return;
  let inner = scope;
  const ctes = cteEntries(value);
  if (ctes.length > 0) {
    const names = new Set<string>();
    for (const { name, body } of ctes) {
      if (name !== "") names.add(name);
      visit(body, view, { names: new Set(names), outer: scope });
    }
    inner = { names, outer: scope };
  }
  checkKind(value, view, inner);
  for (const [key, child] of Object.entries(value)) {
    if (key === "cte_map") continue;
    // A table function's call was checked as one (checkKind); its arguments are expressions.
    if (value.type === "TABLE_FUNCTION" && key === "function" && isNode(child)) {
      for (const part of Object.values(child)) visit(part, view, inner);
    } else visit(child, view, inner);
  }
}

function checkKind(node: Node, view: string, scope: Scope | null): void {
  if ("class" in node) {
    const kind = text(node.class);
    if (!EXPRESSION_CLASSES.has(kind)) {
      refuse(kind || "?", `holds ${describeKind(kind)}, which pulpitum query refuses`);
    }
    if (kind === "FUNCTION") checkFunction(node, QUERY_FUNCTIONS, "function");
    if (kind === "WINDOW") checkFunction(node, QUERY_FUNCTIONS, "window function");
    if (kind === "COLUMN_REF") checkValueKeyword(node);
    return;
  }
  if (typeof node.type !== "string") return;
  // A type's description (a cast's target): names and constants, no expression.
  if (/^[A-Z_]+_TYPE_INFO$/.test(node.type)) return;
  if (!NODE_TYPES.has(node.type)) {
    refuse(node.type, `holds ${node.type}, a construct pulpitum query does not know and refuses`);
  }
  if (node.type === "BASE_TABLE") checkTable(node, view, scope);
  if (node.type === "SHOW_REF" && text(node.table_name) !== "") {
    refuse(
      text(node.table_name),
      `shows ${text(node.table_name)}, which describes the engine, not the table; ` +
        `DESCRIBE or SUMMARIZE the table or a query instead`,
    );
  }
  if (node.type === "TABLE_FUNCTION") {
    const call = isNode(node.function) ? node.function : {};
    if (text(call.class) !== "FUNCTION")
      refuse("?", "calls a table function pulpitum query cannot name");
    checkFunction(call, QUERY_TABLE_FUNCTIONS, "table function");
  }
}

function describeKind(kind: string): string {
  if (kind === "PARAMETER") return "a parameter ($1, ?), which nothing binds,";
  if (kind === "DEFAULT") return "DEFAULT, which has no meaning in a query,";
  return `${kind || "an expression without a class"}, a construct it does not know,`;
}

/** A bare name DuckDB's binder may turn into a call is checked as that call. */
function checkValueKeyword(node: Node): void {
  const names = Array.isArray(node.column_names) ? node.column_names : [];
  const last = lower(names[names.length - 1]);
  const called = VALUE_FUNCTION_NAMES.get(last);
  if (called !== undefined && !QUERY_FUNCTIONS.has(called)) {
    refuse(
      last,
      `names ${last}, which DuckDB reads as a call to ${called} when no column has that name, ` +
        "and that function is not on pulpitum query's allowlist",
    );
  }
}

/**
 * The first thing the parsed statements (`json_serialize_sql`'s
 * `statements`) call, read or hold that the allowlist does not allow, or
 * null when everything is allowed. `view` is the table's view name.
 */
export function checkParsedQuery(statements: Json, view: string): QueryRefusal | null {
  if (!Array.isArray(statements)) return { name: "?", reason: "has no parse to check" };
  try {
    visit(statements, view.toLowerCase(), null);
    return null;
  } catch (error) {
    if (error instanceof Refused) return error.refusal;
    if (error instanceof RangeError) {
      return { name: "?", reason: "nests deeper than pulpitum query's check follows" };
    }
    throw error;
  }
}
