/**
 * The REST rate limits (docs/conventions.md#rate-limits), raised for suites and loads that send
 * thousands of requests a minute with one principal or from one address; the tests of the limits
 * set their own. Apart from mesh.ts, which needs vitest, so the loads of bench/ can read it.
 */
export const relaxedRateLimits: Record<string, string> = {
  REST_RATE_LIMIT_PER_MINUTE: '10000000',
  REST_RATE_LIMIT_PER_IP_PER_MINUTE: '10000000',
};
