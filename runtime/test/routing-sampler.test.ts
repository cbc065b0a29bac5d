import { noAllowedCandidateMessage, pickCandidate, posterior, Sampler } from '@switchboard/runtime/routing-sampler';
import { describe, expect, it } from 'vitest';

/**
 * The routing pick every component shares: the seeded sampler and its Beta draws, and the pick
 * among a tier's candidates (policy first, the exploration floor, then Thompson sampling).
 */

describe('sampler', () => {
  it('is deterministic for a seed, and differs between seeds', () => {
    const draws = (seed: number) => {
      const sampler = new Sampler(seed);
      return Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? sampler.next() : sampler.beta(2 + (i % 5), 3)));
    };
    expect(draws(42)).toEqual(draws(42));
    expect(draws(42)).not.toEqual(draws(43));
    // Unseeded samplers start from a random seed.
    expect(new Sampler().next()).not.toBe(new Sampler().next());
  });

  it('draws uniforms in [0, 1) with mean 1/2', () => {
    const sampler = new Sampler(7);
    const draws = Array.from({ length: 20_000 }, () => sampler.next());
    expect(draws.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(Math.abs(draws.reduce((a, b) => a + b, 0) / draws.length - 0.5)).toBeLessThan(0.01);
  });

  it('draws Beta(alpha, beta) with the right mean and variance', () => {
    const sampler = new Sampler(42);
    for (const [alpha, beta] of [
      [3, 7],
      [1, 1],
      [1, 21],
      [21, 1],
      [30.5, 2],
    ]) {
      const draws = Array.from({ length: 20_000 }, () => sampler.beta(alpha, beta));
      expect(draws.every((x) => x > 0 && x < 1)).toBe(true);
      const mean = draws.reduce((a, b) => a + b, 0) / draws.length;
      const variance = draws.reduce((a, b) => a + (b - mean) ** 2, 0) / draws.length;
      const expectedMean = alpha / (alpha + beta);
      const expectedVariance = (alpha * beta) / ((alpha + beta) ** 2 * (alpha + beta + 1));
      expect(Math.abs(mean - expectedMean), `Beta(${alpha}, ${beta}) mean ${mean}`).toBeLessThan(0.01);
      expect(Math.abs(variance - expectedVariance) / expectedVariance, `Beta(${alpha}, ${beta}) variance ${variance}`).toBeLessThan(0.1);
    }
  });
});

describe('pickCandidate', () => {
  const candidate = (name: string, region: 'cn' | 'overseas', up: number, down: number) => ({ name, region, ...posterior(up, down) });
  const bad = candidate('bad', 'overseas', 0, 30);
  const good = candidate('good', 'overseas', 30, 0);
  const local = candidate('local', 'cn', 0, 0);

  function shares(candidates: ReturnType<typeof candidate>[], policy: 'any' | 'cn-only' | 'overseas-only', exploration: number, seed: number) {
    const sampler = new Sampler(seed);
    const counts: Record<string, number> = {};
    const calls = 4000;
    for (let i = 0; i < calls; i++) {
      const name = pickCandidate(candidates, policy, exploration, sampler)?.name ?? 'none';
      counts[name] = (counts[name] ?? 0) + 1;
    }
    return Object.fromEntries(Object.entries(counts).map(([name, count]) => [name, count / calls]));
  }

  it('scores no evidence as Beta(1, 1) and each thumb as one more of alpha or beta', () => {
    expect(posterior(0, 0)).toEqual({ alpha: 1, beta: 1 });
    expect(posterior(4, 2)).toEqual({ alpha: 5, beta: 3 });
  });

  it('keeps to the policy, and picks nothing when it allows no candidate', () => {
    expect(shares([bad, good, local], 'cn-only', 0.5, 1)).toEqual({ local: 1 });
    expect(shares([bad, good, local], 'overseas-only', 0.05, 1).local).toBeUndefined();
    expect(pickCandidate([bad, good], 'cn-only', 0.05, new Sampler(1))).toBeUndefined();
    expect(pickCandidate([], 'any', 0.05, new Sampler(1))).toBeUndefined();
    expect(noAllowedCandidateMessage('fast', 'cn-only')).toBe('No model of the fast tier is allowed by the cn-only routing policy.');
  });

  it('picks by the posterior, keeping a starved candidate near the exploration floor', () => {
    // bad is picked by the uniform share only (0.05 / 2).
    const overseas = shares([bad, good, local], 'overseas-only', 0.05, 42);
    expect(overseas.bad).toBeGreaterThan(0.01);
    expect(overseas.bad).toBeLessThan(0.045);
    expect(overseas.good).toBeGreaterThan(0.95);
    // Without exploration the candidate with only thumbs down never wins a draw against Beta(31, 1).
    expect(shares([bad, good], 'any', 0, 42)).toEqual({ good: 1 });
    // Equal evidence: an even split.
    const even = shares([candidate('a', 'overseas', 3, 3), candidate('b', 'cn', 3, 3)], 'any', 0, 7);
    expect(Math.abs(even.a - 0.5)).toBeLessThan(0.05);
  });

  it('picks the same for the same seed', () => {
    const picks = (seed: number) => {
      const sampler = new Sampler(seed);
      return Array.from({ length: 200 }, () => pickCandidate([bad, good, local], 'any', 0.3, sampler)?.name);
    };
    expect(picks(42)).toEqual(picks(42));
    expect(picks(42)).not.toEqual(picks(7));
  });
});
