import { randomInt } from 'node:crypto';
import { policyAllows, type Region, type RoutingPolicy } from './model-catalog.js';

/**
 * The pick among a service tier's candidate models (docs/api/conversations.md#self-learning-routing),
 * one implementation for every component that routes, so a pick made from a replica of the scores
 * follows the same rules as one made beside them. Each candidate has a Beta posterior: alpha = 1 +
 * thumbs up, beta = 1 + thumbs down. The geographic policy filters first (cn-only never leaves cn,
 * overseas-only never enters it); then a share `exploration` of picks is uniform among the allowed
 * candidates, so none is ever starved of new evidence, and the others draw from every allowed
 * candidate's posterior and take the highest draw (Thompson sampling).
 */

/** The share of uniform picks when nothing else is configured. */
export const defaultExploration = 0.05;

/** A candidate's Beta posterior from its feedback counts (none yet: Beta(1, 1), uniform). */
export function posterior(thumbsUp: number, thumbsDown: number): { alpha: number; beta: number } {
  return { alpha: 1 + thumbsUp, beta: 1 + thumbsDown };
}

export interface ScoredCandidate {
  region: Region;
  alpha: number;
  beta: number;
}

/** The refusal's message when the policy allows no candidate of the tier: the same words wherever it is refused. */
export function noAllowedCandidateMessage(tier: string, policy: RoutingPolicy): string {
  return `No model of the ${tier} tier is allowed by the ${policy} routing policy.`;
}

/** One of `candidates` the policy allows, picked as described above; undefined when it allows none. */
export function pickCandidate<C extends ScoredCandidate>(
  candidates: readonly C[],
  policy: RoutingPolicy,
  exploration: number,
  sampler: Sampler,
): C | undefined {
  const allowed = candidates.filter((candidate) => policyAllows(policy, candidate.region));
  if (allowed.length <= 1) return allowed[0];
  if (sampler.next() < exploration) return allowed[Math.floor(sampler.next() * allowed.length)];
  let best = -1;
  let chosen = allowed[0];
  for (const candidate of allowed) {
    const draw = sampler.beta(candidate.alpha, candidate.beta);
    if (draw > best) {
      best = draw;
      chosen = candidate;
    }
  }
  return chosen;
}

/**
 * A seedable source of randomness for routing (tests fix the seed): mulberry32, plus the Beta
 * draws Thompson sampling needs (Marsaglia-Tsang gamma for shapes ≥ 1). Not for secrets.
 */
export class Sampler {
  private state: number;

  constructor(seed: number = randomInt(2 ** 32 - 1)) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  private normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Gamma(shape, 1) for shape ≥ 1. */
  private gamma(shape: number): number {
    const d = shape - 1 / 3;
    const c = 1 / Math.sqrt(9 * d);
    for (;;) {
      let x: number;
      let v: number;
      do {
        x = this.normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const u = 1 - this.next();
      if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v;
    }
  }

  /** A draw from Beta(alpha, beta), alpha and beta ≥ 1. */
  beta(alpha: number, beta: number): number {
    const x = this.gamma(alpha);
    return x / (x + this.gamma(beta));
  }
}
