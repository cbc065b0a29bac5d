import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { bootMesh, newUser } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwitchboardClient, RateLimitError } from '../src/index.js';

/**
 * The SDK against the gateway's REST rate limits (docs/conventions.md#rate-limits), lowered to
 * 4 calls a minute per principal: it waits the 429's Retry-After (the waits are recorded, not
 * slept), retries within its budget, then throws RateLimitError with the contract's details.
 * Needs the gateway's rate limits (workstream A); red without them.
 */

let mesh: Mesh;

beforeAll(async () => {
  mesh = await bootMesh({ REST_RATE_LIMIT_PER_MINUTE: '4', REST_RATE_LIMIT_PER_IP_PER_MINUTE: '1000' });
});

afterAll(async () => {
  await mesh?.stop();
});

async function signedIn() {
  const waits: number[] = [];
  const sb = createSwitchboardClient({
    baseUrl: mesh.gatewayUrl,
    backoff: {
      sleep: async (ms) => {
        waits.push(ms);
      },
    },
  });
  await sb.auth.register(newUser());
  return { sb, waits };
}

describe('REST rate limits through the SDK', () => {
  it('waits Retry-After between attempts, gives up after its budget, and leaves other users alone', async () => {
    const { sb, waits } = await signedIn();
    let allowed = 0;
    let refusal: unknown;
    // Ten calls are more than the minute's four: one of them must be refused.
    for (let call = 0; call < 10 && refusal === undefined; call++) {
      refusal = await sb.account.retrieve().then(
        () => {
          allowed++;
          return undefined;
        },
        (err: unknown) => err,
      );
    }
    expect(refusal).toBeInstanceOf(RateLimitError);
    const error = refusal as RateLimitError;
    expect(error).toMatchObject({ status: 429, code: 'rate_limited', metadata: { retry_after_seconds: error.retryAfter } });
    expect(error.retryAfter).toBeGreaterThanOrEqual(1);
    expect(error.retryAfter).toBeLessThanOrEqual(60);
    expect(error.headers.get('ratelimit-policy')).toBe('"default";q=4;w=60');
    expect(error.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+$/);
    // At most 4 calls of the minute succeeded (registration may have used one); the refused call
    // was tried 3 times (maxRetries 2), each retry after the answer's Retry-After, in whole seconds.
    expect(allowed).toBeLessThanOrEqual(4);
    expect(waits).toHaveLength(2);
    for (const wait of waits) {
      expect(wait % 1000).toBe(0);
      expect(wait).toBeGreaterThanOrEqual(1000);
      expect(wait).toBeLessThanOrEqual(60_000);
    }

    const other = await signedIn();
    expect((await other.sb.account.retrieve()).email).toContain('@');
    expect(other.waits).toEqual([]);
  });
});
