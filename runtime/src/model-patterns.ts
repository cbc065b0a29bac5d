/**
 * A key's `allowed_models` (docs/api/keys.md#allowed-models): patterns matched against the whole
 * model id, case-sensitive, where `*` matches any run of characters (none included) and every
 * other character only itself. No regular expression is built from them: a pattern is a
 * client's text, and the two-pointer match below stays linear in practice and quadratic at worst
 * (a pattern is at most 200 characters, an id short), with no backtracking blow-up.
 */

/** Whether `pattern` matches the whole of `id`. */
export function modelMatches(pattern: string, id: string): boolean {
  let p = 0;
  let i = 0;
  /** The last `*` seen, and where in `id` its run would end if it swallows one more character. */
  let star = -1;
  let resume = 0;
  while (i < id.length) {
    if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      resume = i;
    } else if (p < pattern.length && pattern[p] === id[i]) {
      p++;
      i++;
    } else if (star >= 0) {
      // The last `*` takes one more character, and the rest of the pattern is tried from there.
      p = star + 1;
      i = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}

/** Which models a key may use: every model (null: no list), or those some pattern matches. */
export type ModelAllowList = (id: string) => boolean;

export const allModels: ModelAllowList = () => true;

export function modelAllowList(patterns: readonly string[] | null): ModelAllowList {
  if (patterns === null) return allModels;
  const exact = new Set(patterns.filter((pattern) => !pattern.includes('*')));
  const wild = patterns.filter((pattern) => pattern.includes('*'));
  return (id) => exact.has(id) || wild.some((pattern) => modelMatches(pattern, id));
}
