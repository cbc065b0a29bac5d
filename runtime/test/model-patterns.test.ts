import { allModels, modelAllowList, modelMatches } from '@switchboard/runtime/model-patterns';
import { describe, expect, it } from 'vitest';

/** allowed_models patterns (docs/api/keys.md#allowed-models): `*` is any run, the whole id must match, case counts. */

describe('model patterns', () => {
  it('matches the whole id, with `*` as any run of characters (none included)', () => {
    expect(modelMatches('acc-large', 'acc-large')).toBe(true);
    expect(modelMatches('acc-large', 'acc-large-2')).toBe(false);
    expect(modelMatches('acc', 'acc-large')).toBe(false);
    expect(modelMatches('service/*', 'service/fast')).toBe(true);
    expect(modelMatches('service/*', 'service/')).toBe(true);
    expect(modelMatches('service/*', 'services/fast')).toBe(false);
    expect(modelMatches('*', '')).toBe(true);
    expect(modelMatches('*', 'anything/at-all')).toBe(true);
    expect(modelMatches('gpt-*-mini', 'gpt-4o-mini')).toBe(true);
    expect(modelMatches('gpt-*-mini', 'gpt-4o-mini-2')).toBe(false);
    expect(modelMatches('*mini*', 'gpt-4o-mini-2')).toBe(true);
    expect(modelMatches('a*b*c', 'aXbYbZc')).toBe(true);
    expect(modelMatches('a*b*c', 'aXbYcZ')).toBe(false);
    expect(modelMatches('**', 'x')).toBe(true);
  });

  it('is case-sensitive and takes every other character literally', () => {
    expect(modelMatches('GPT-*', 'gpt-4o')).toBe(false);
    expect(modelMatches('m.1', 'mx1')).toBe(false);
    expect(modelMatches('m.1', 'm.1')).toBe(true);
    expect(modelMatches('m?', 'm1')).toBe(false);
    expect(modelMatches('(a|b)', 'a')).toBe(false);
  });

  it('stays fast on a pattern built to backtrack', () => {
    const pattern = `${'*a'.repeat(100)}`;
    const started = performance.now();
    expect(modelMatches(pattern, 'a'.repeat(99) + 'b'.repeat(100))).toBe(false);
    expect(performance.now() - started).toBeLessThan(100);
  });

  it('allows every model without a list, else those some pattern matches', () => {
    expect(modelAllowList(null)).toBe(allModels);
    const list = modelAllowList(['acc-large', 'service/*', 'gpt-*']);
    expect(['acc-large', 'service/fast', 'gpt-4o', 'acc-small', 'claude'].map(list)).toEqual([true, true, true, false, false]);
    expect(modelAllowList([])('x')).toBe(false);
  });
});
