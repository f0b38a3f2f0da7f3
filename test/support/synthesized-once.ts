/**
 * A template test file synthesizes the same stack for many of its tests;
 * each synthesis costs a second or more of CPU. `synthesizedOnce` wraps a
 * file's synthesize function so that each distinct set of props (compared
 * as JSON) is synthesized once per file and its stack and template shared,
 * read only, by every test that asks for it. A synthesis that throws is not
 * remembered: a test expecting the refusal sees it every time.
 */
export function synthesizedOnce<P, R>(synthesize: (props?: P) => R): (props?: P) => R {
  const made = new Map<string, R>();
  return (props?: P) => {
    const key = JSON.stringify(props ?? {});
    let result = made.get(key);
    if (result === undefined) {
      result = synthesize(props);
      made.set(key, result);
    }
    return result;
  };
}
