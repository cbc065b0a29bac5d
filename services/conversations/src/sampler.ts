import { randomInt } from 'node:crypto';

/**
 * A seedable source of randomness for routing (tests fix the seed, ROUTING_SEED): mulberry32,
 * plus the Beta draws Thompson sampling needs (Marsaglia-Tsang gamma for shapes ≥ 1). Not for
 * secrets.
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
