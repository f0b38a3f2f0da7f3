/**
 * Schemas (valibot) of a manifest's fields, each refusing a value with the
 * problem every manifest integrity error words the same way: "manifest field
 * <name> is <value>, expected <form>".
 */
import * as v from "valibot";
import { errorMessage } from "../errors.js";

/** A field's problem, worded as every manifest integrity error words it. */
export const fieldProblem = (field: string, problem: string) =>
  `manifest field ${field} ${problem}`;

export function nonEmptyString(field: string) {
  return v.custom<string>(
    (value) => typeof value === "string" && value !== "",
    (issue) => fieldProblem(field, `is ${JSON.stringify(issue.input)}, expected a string`),
  );
}

export function nonNegativeInteger(field: string) {
  return v.custom<number>(
    (value) => typeof value === "number" && Number.isSafeInteger(value) && value >= 0,
    (issue) =>
      fieldProblem(field, `is ${JSON.stringify(issue.input)}, expected a non-negative integer`),
  );
}

export function exactly<const T>(field: string, accepted: T) {
  return v.custom<T>(
    (value) => value === accepted,
    (issue) =>
      fieldProblem(field, `is ${JSON.stringify(issue.input)}; this reader accepts ${accepted}`),
  );
}

/** The value `parse` returns; what it throws is the field's problem ("is invalid: …"). */
export function parsedBy<I, T>(field: string, parse: (value: I) => T) {
  return v.rawTransform<I, T>(({ dataset, addIssue, NEVER }) => {
    try {
      return parse(dataset.value);
    } catch (error) {
      addIssue({ message: fieldProblem(field, `is invalid: ${errorMessage(error)}`) });
      return NEVER;
    }
  });
}

export function oneOf<const T extends string>(field: string, accepted: readonly T[], or = "") {
  return v.custom<T>(
    (value) => (accepted as readonly unknown[]).includes(value),
    (issue) =>
      fieldProblem(
        field,
        `is ${JSON.stringify(issue.input)}, expected one of ${accepted.join(", ")}${or}`,
      ),
  );
}
