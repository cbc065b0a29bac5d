import type { LeaseOwner } from '@switchboard/data-plane/budget-leases';
import type { RateDimension, ReplicatedKey } from '@switchboard/data-plane/key-replica';
import type { RateFacts } from '@switchboard/data-plane/lease-owners';
import { RateLimiter, rateLeases } from '@switchboard/data-plane/rate-limits';
import { ApiError } from '@switchboard/runtime/api-error';
import { createLogger } from '@switchboard/runtime/log';
import { allModels } from '@switchboard/runtime/model-patterns';
import { afterEach, describe, expect, it } from 'vitest';

/**
 * Rate limits at the front door (docs/api/front-door.md#rate-limits) on leases from an owner that
 * keeps, as the keys service does (docs/money-path.md#rate-limit-leases), what every lease of a
 * key holds in the window within the limit: two replicas admit exactly the limit between them,
 * concurrency never passes its slots, and every admission says where the limits stand.
 */

const log = createLogger('data-plane', 'silent');

interface OwnedLease {
  keyId: string;
  dimension: RateDimension;
  window: number;
  granted: number;
  expiresAt: number;
}

/** The keys service's rule for rate leases, in memory: Σ granted of the live leases of a key's dimension and window ≤ limit. */
class ExactOwner {
  readonly leases = new Map<string, OwnedLease>();
  calls = 0;
  private next = 0;
  constructor(readonly limits: Map<string, Partial<Record<RateDimension, number>>>) {}

  owner(dimension: RateDimension): LeaseOwner<RateFacts> {
    return {
      lease: async (keyId, request) => {
        this.calls += 1;
        await new Promise((resolve) => setTimeout(resolve, 1));
        const now = Date.now();
        const limit = this.limits.get(keyId)?.[dimension];
        if (limit === undefined) return { leaseId: '', grantedUsd: '0', expiresAt: new Date(now + 1000), unlimited: true, facts: { remaining: 0 } };
        const window = dimension === 'concurrency' ? 0 : Math.floor(now / 60_000);
        const expiresAt = dimension === 'concurrency' ? now + 30_000 : (window + 1) * 60_000;
        const live = [...this.leases.entries()].filter(
          ([id, lease]) => id !== request.leaseId && lease.keyId === keyId && lease.dimension === dimension && lease.window === window && lease.expiresAt > now,
        );
        const used = Number(request.usedUsd);
        const held = live.reduce((sum, [, lease]) => sum + lease.granted, 0);
        const room = limit - held - used;
        const min = Number(request.minUsd);
        const headroom = room < min ? 0 : Math.min(room, Math.max(min, Math.min(Number(request.wantUsd), Math.floor(room / (live.length + 1)))));
        const existing = request.leaseId ? this.leases.get(request.leaseId) : undefined;
        const resetsAt = dimension === 'concurrency' ? undefined : new Date(expiresAt);
        if (!existing && headroom === 0) return { leaseId: '', grantedUsd: '0', expiresAt: new Date(expiresAt), facts: { limit, remaining: room, resetsAt } };
        const id = existing ? request.leaseId : `rte_${++this.next}`;
        this.leases.set(id, { keyId, dimension, window, granted: used + headroom, expiresAt });
        return { leaseId: id, grantedUsd: String(used + headroom), expiresAt: new Date(expiresAt), facts: { limit, remaining: room - headroom, resetsAt } };
      },
      release: async (leaseId, used) => {
        const lease = this.leases.get(leaseId);
        if (lease) lease.granted = Number(used);
      },
    };
  }
}

function keyWith(keyId: string, rateLimits: ReplicatedKey['rateLimits']): ReplicatedKey {
  return {
    keyId,
    workspaceId: 'org_1',
    status: 'active',
    capUsd: null,
    routingPolicy: 'any',
    scopes: new Set(['inference']),
    expiresAt: null,
    allows: allModels,
    rateLimits,
    budgetId: keyId,
    spendLimits: [],
  };
}

const limiters: RateLimiter[] = [];
afterEach(async () => {
  for (const limiter of limiters.splice(0)) await limiter.stop();
});

function replicas(owner: ExactOwner, count: number): RateLimiter[] {
  return Array.from({ length: count }, () => {
    const limiter = new RateLimiter(rateLeases(log, (dimension) => owner.owner(dimension)));
    limiter.start();
    limiters.push(limiter);
    return limiter;
  });
}

async function attempt(limiter: RateLimiter, key: ReplicatedKey, tokens = 10) {
  let headers: Record<string, string> = {};
  try {
    const hold = await limiter.admit(key, tokens, (h) => {
      headers = h;
    });
    return { ok: true as const, hold, headers };
  } catch (err) {
    return { ok: false as const, err: err as ApiError, headers };
  }
}

/** Whole seconds to the end of this UTC minute, or a wait into the next one when it is too close to call. */
async function awayFromMinuteEnd(margin = 10_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < margin) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

describe('rate limits on leases', () => {
  it('admits exactly requests_per_minute of 100 concurrent requests over two replicas, and refuses the rest with a 429 and its headers', async () => {
    await awayFromMinuteEnd();
    const owner = new ExactOwner(new Map([['key_r', { requests: 20 }]]));
    const [a, b] = replicas(owner, 2);
    const key = keyWith('key_r', { requests: 20 });
    const outcomes = await Promise.all(Array.from({ length: 100 }, (_, i) => attempt(i % 2 ? a : b, key)));
    const admitted = outcomes.filter((outcome) => outcome.ok);
    expect(admitted).toHaveLength(20);
    const refused = outcomes.find((outcome) => !outcome.ok)!;
    expect(refused.err).toBeInstanceOf(ApiError);
    expect(refused.err.status).toBe(429);
    expect(refused.err.code).toBe('rate_limit_exceeded');
    const resetSeconds = refused.err.options.metadata!.reset_seconds as number;
    expect(refused.err.options.metadata).toEqual({ limit: 20, scope: 'requests', reset_seconds: resetSeconds });
    expect(resetSeconds).toBeGreaterThanOrEqual(1);
    expect(resetSeconds).toBeLessThanOrEqual(60);
    expect(refused.err.options.headers).toEqual({ 'retry-after': String(resetSeconds) });
    expect(refused.headers).toMatchObject({ 'x-ratelimit-limit-requests': '20', 'x-ratelimit-remaining-requests': '0' });
    expect(refused.headers['x-ratelimit-reset-requests']).toMatch(/^\d+s$/);
    // No token headers: the key has no token limit.
    expect(Object.keys(refused.headers).some((name) => name.endsWith('-tokens'))).toBe(false);
    for (const outcome of admitted) outcome.hold!.end();
    // Requests are never given back: the 21st is still refused when everyone is done.
    expect((await attempt(a, key)).ok).toBe(false);
  });

  it('never holds more than max_concurrent slots across replicas, and frees a slot when its request ends', async () => {
    const owner = new ExactOwner(new Map([['key_c', { concurrency: 3 }]]));
    const [a, b] = replicas(owner, 2);
    const key = keyWith('key_c', { concurrency: 3 });
    let running = 0;
    let most = 0;
    let done = 0;
    let refused = 0;
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        for (;;) {
          const outcome = await attempt(i % 2 ? a : b, key);
          if (!outcome.ok) {
            expect(outcome.err.options.metadata).toEqual({ limit: 3, scope: 'concurrency', reset_seconds: 1 });
            refused += 1;
            await new Promise((resolve) => setTimeout(resolve, 5));
            continue;
          }
          running += 1;
          most = Math.max(most, running);
          await new Promise((resolve) => setTimeout(resolve, 3));
          running -= 1;
          outcome.hold.end();
          done += 1;
          return;
        }
      }),
    );
    expect(done).toBe(40);
    expect(most).toBeLessThanOrEqual(3);
    expect(refused).toBeGreaterThan(0);
  }, 30_000);

  it('counts a request’s token estimate, corrects it to its usage, and gives back what a refusal took of the other limits', async () => {
    await awayFromMinuteEnd();
    const owner = new ExactOwner(new Map([['key_t', { tokens: 1000, requests: 100 }]]));
    const [a] = replicas(owner, 1);
    const key = keyWith('key_t', { tokens: 1000, requests: 100 });
    const first = await attempt(a, key, 600);
    expect(first.ok).toBe(true);
    expect(first.headers['x-ratelimit-limit-tokens']).toBe('1000');
    expect(Number(first.headers['x-ratelimit-remaining-tokens'])).toBe(400);
    expect(first.headers['x-ratelimit-remaining-requests']).toBe('99');
    // 600 more do not fit while the first holds its estimate…
    const second = await attempt(a, key, 600);
    expect(second.ok).toBe(false);
    expect(second.err?.options.metadata).toMatchObject({ limit: 1000, scope: 'tokens' });
    // …and the refusal took no request (requests are checked last).
    // Once the first used 100 tokens of its 600, they fit.
    first.hold!.settleTokens(100);
    first.hold!.end();
    const third = await attempt(a, key, 600);
    expect(third.ok).toBe(true);
    expect(third.headers['x-ratelimit-remaining-tokens']).toBe('300');
    expect(third.headers['x-ratelimit-remaining-requests']).toBe('98');
  });

  it('needs no lease for a key without limits, and says the limits as they stand without asking', async () => {
    const owner = new ExactOwner(new Map());
    const [a] = replicas(owner, 1);
    const free = await attempt(a, keyWith('key_free', {}));
    expect(free).toMatchObject({ ok: true, headers: {} });
    expect(owner.calls).toBe(0);
    const limited = keyWith('key_new', { requests: 5, tokens: 50 });
    expect(a.headers(limited, Date.UTC(2026, 0, 1, 0, 0, 45))).toEqual({
      'x-ratelimit-limit-requests': '5',
      'x-ratelimit-remaining-requests': '5',
      'x-ratelimit-reset-requests': '15s',
      'x-ratelimit-limit-tokens': '50',
      'x-ratelimit-remaining-tokens': '50',
      'x-ratelimit-reset-tokens': '15s',
    });
    expect(owner.calls).toBe(0);
  });
});
