/**
 * An invocation that names one bucket by the work message's fields and adds
 * one optional integer of its own (a manual run's `max_phases`, a restore's
 * `hold_seconds`). The extra field is read and range-checked here; the rest
 * must be exactly a work message, so an unknown field is still refused.
 */
import { fields, integerField, readInput } from "../input.js";
import { WORK_MESSAGE_FORM, workItemFromObject, type WorkItem } from "../ports/work-queue.js";

export interface WorkItemOption {
  readonly field: string;
  readonly fallback: number;
  readonly min: number;
  readonly max: number;
}

/** The accepted form: the work message with the option added. */
export function workItemOptionForm(option: WorkItemOption): string {
  return `${WORK_MESSAGE_FORM.slice(0, -1)},"${option.field}"?:integer ${option.min}..${option.max}}`;
}

/**
 * Validate such an invocation: the bucket's work item and the option's value
 * (its fallback when absent). `form`: the accepted form errors name, when the
 * caller accepts more fields than this one option (it reads those itself).
 */
export function readWorkItemWithOption(
  value: unknown,
  input: string,
  option: WorkItemOption,
  form = workItemOptionForm(option),
): { readonly item: WorkItem; readonly option: number } {
  const read = readInput(fields({ [option.field]: integerField(option.field, option) }), value, {
    input,
    form,
  });
  const { [option.field]: chosen, ...message } = read;
  return { item: workItemFromObject(message, input, form), option: chosen as number };
}
