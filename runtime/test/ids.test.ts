import { describe, expect, it } from 'vitest';
import { newId, newToken, randomBase62 } from '../src/ids.js';

const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

describe('newId', () => {
  it('is the prefix, an underscore and 22 base62 characters', () => {
    for (const prefix of ['usr', 'org', 'key', 'conv', 'msg', 'wh', 'dlv', 'evt', 'fb', 'req']) {
      const id = newId(prefix);
      expect(id).toMatch(new RegExp(`^${prefix}_[0-9A-Za-z]{22}$`));
    }
  });

  it('gives 100,000 distinct ids', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 100_000; i++) ids.add(newId('usr'));
    expect(ids.size).toBe(100_000);
  });
});

describe('randomBase62', () => {
  it('has the requested length and only base62 characters', () => {
    expect(randomBase62(0)).toBe('');
    for (const length of [1, 7, 22, 63, 5_000]) {
      const value = randomBase62(length);
      expect(value).toHaveLength(length);
      expect(value).toMatch(/^[0-9A-Za-z]*$/);
    }
  });

  it('draws every character about equally often (no modulo bias)', () => {
    // 620,000 characters: 10,000 expected per symbol. With 61 degrees of freedom the statistic
    // is ~61 ± 11 for a uniform source; a plain `byte % 62` would put ~4,000 here.
    const sample = randomBase62(620_000);
    const counts = new Map<string, number>();
    for (const char of sample) counts.set(char, (counts.get(char) ?? 0) + 1);
    expect([...counts.keys()].sort().join('')).toBe([...alphabet].sort().join(''));
    const expected = sample.length / alphabet.length;
    let chiSquare = 0;
    for (const char of alphabet) chiSquare += ((counts.get(char) ?? 0) - expected) ** 2 / expected;
    expect(chiSquare).toBeLessThan(150);
  });

  it('is uniform at each position of an id too', () => {
    // The first character of 62,000 ids: 1,000 expected per symbol.
    const counts = new Map<string, number>();
    const n = 62_000;
    for (let i = 0; i < n; i++) {
      const first = newId('x')[2];
      counts.set(first, (counts.get(first) ?? 0) + 1);
    }
    const expected = n / alphabet.length;
    let chiSquare = 0;
    for (const char of alphabet) chiSquare += ((counts.get(char) ?? 0) - expected) ** 2 / expected;
    expect(chiSquare).toBeLessThan(150);
  });
});

describe('newToken', () => {
  it('is 32 random bytes in base64url', () => {
    const token = newToken();
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(token, 'base64url')).toHaveLength(32);
    expect(newToken()).not.toBe(token);
  });
});
