import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Pricing } from '../src/pricing.js';

/** The shared pricing module: exact decimals per tier and plan, the file's checks, and the upper-bound estimate. */

const pricing = Pricing.load(fileURLToPath(new URL('../pricing.json', import.meta.url)));

describe('the pricing file', () => {
  const cost = (tier: 'fast' | 'balanced' | 'passthrough' | 'byok', plan: string, input = 0n, output = 0n, upstream?: string) =>
    pricing.cost({ tier, inputTokens: input, outputTokens: output, upstreamCostUsd: upstream }, plan).toFixed();

  it('follows the pricing file exactly, per tier and plan', () => {
    expect(pricing.version).toBe('2026-11-01');
    expect(cost('fast', 'payg', 1_000_000n, 1_000_000n)).toBe('0.5');
    expect(cost('fast', 'pro', 1_000_000n, 1_000_000n)).toBe('0.4');
    expect(cost('balanced', 'payg', 1_000_000n, 1_000_000n)).toBe('2.5');
    expect(cost('balanced', 'pro', 1_000_000n, 1_000_000n)).toBe('2');
    expect(cost('fast', 'payg', 1n, 0n)).toBe('0.0000001');
    expect(cost('passthrough', 'payg', 0n, 0n, '0.1')).toBe('0.105');
    expect(cost('passthrough', 'pro', 0n, 0n, '0.1')).toBe('0.103');
    expect(cost('passthrough', 'payg', 0n, 0n, '0.000000000001')).toBe('0.00000000000105');
    expect(cost('byok', 'payg', 5_000_000n, 0n, '2.00')).toBe('0.1');
    expect(cost('byok', 'pro', 0n, 0n, '0.3')).toBe('0.015');
    // Tokens beyond 2^53 stay exact.
    expect(cost('fast', 'payg', 90_071_992_547_409_930n, 0n)).toBe('9007199254.740993');
  });

  it('decides the tier from the model and byok', () => {
    expect(pricing.tierOf('service/fast', false)).toBe('fast');
    expect(pricing.tierOf('service/balanced', false)).toBe('balanced');
    expect(pricing.tierOf('service/fast', true)).toBe('byok');
    expect(pricing.tierOf('openai/gpt-x', false)).toBe('passthrough');
  });

  it('refuses a pricing file with a float or a missing plan', () => {
    const file = JSON.parse(
      JSON.stringify({
        ...pricingJson(),
        tiers: { ...pricingJson().tiers, fast: { model: 'service/fast', input_usd_per_1m: 0.1, output_usd_per_1m: '0.40' } },
      }),
    );
    expect(() => Pricing.parse(JSON.stringify(file))).toThrow(/tiers.fast.input_usd_per_1m/);
    expect(() => Pricing.parse(JSON.stringify({ ...pricingJson(), default_plan: 'gold' }))).toThrow(/default_plan/);
  });

  it('lists the tier prices as the file states them and the largest passthrough markup of any plan', () => {
    expect(pricing.priceList()).toEqual({
      version: '2026-11-01',
      tiers: [
        { tier: 'fast', inputUsdPer1m: '0.10', outputUsdPer1m: '0.40' },
        { tier: 'balanced', inputUsdPer1m: '0.50', outputUsdPer1m: '2.00' },
      ],
      maxPassthroughMarkupPct: '5',
    });
    // Compared as decimals, not as text ("10" > "9.5" > "5"), and returned as written.
    const plan = (markup: string) => ({
      name: markup,
      monthly_fee_usd: '0',
      discounts: { fast_pct: '0', balanced_pct: '0', passthrough_markup_pct: markup, byok_fee_pct: '5' },
    });
    const plans = { payg: plan('5'), a: plan('10.50'), b: plan('9.5'), c: plan('10.5') };
    expect(Pricing.parse(JSON.stringify({ ...pricingJson(), plans })).priceList().maxPassthroughMarkupPct).toBe('10.50');
  });
});

describe('the estimate', () => {
  const tokens = { input: 1_000_000, output: 1_000_000 };

  it('prices a service tier at its list price, above every plan discount', () => {
    expect(pricing.estimate({ tier: 'fast' }, tokens)).toBe('0.5');
    expect(pricing.estimate({ tier: 'balanced' }, tokens)).toBe('2.5');
    for (const plan of pricing.plans) {
      const cost = pricing.cost({ tier: 'balanced', inputTokens: 1_000_000n, outputTokens: 1_000_000n }, plan.planId);
      expect(cost.lte(pricing.estimate({ tier: 'balanced' }, tokens)), plan.planId).toBe(true);
    }
  });

  it('prices passthrough at the dearest of the models with the largest markup, above every plan', () => {
    const models = [
      { inputUsdPer1m: '0.15', outputUsdPer1m: '0.60' },
      { inputUsdPer1m: '0.20', outputUsdPer1m: '0.50' },
    ];
    // max(0.75, 0.70) × 1.05 (payg's markup beats pro's 3).
    expect(pricing.estimate({ models }, tokens)).toBe('0.7875');
    const upstream = '0.75';
    for (const plan of pricing.plans) {
      const cost = pricing.cost({ tier: 'passthrough', inputTokens: 0n, outputTokens: 0n, upstreamCostUsd: upstream }, plan.planId);
      expect(cost.lte(pricing.estimate({ models }, tokens)), plan.planId).toBe(true);
    }
    expect(() => pricing.estimate({ models: [] }, tokens)).toThrow(/no model/);
  });

  it('rounds up to 18 decimals, never below the cost', () => {
    // 1 token at 0.10 per 1M × 1.05 = 0.000000105; at 0.000000000001 per 1M it is below 10^-18.
    expect(pricing.estimate({ models: [{ inputUsdPer1m: '0.10', outputUsdPer1m: '0' }] }, { input: 1, output: 0 })).toBe('0.000000105');
    expect(pricing.estimate({ models: [{ inputUsdPer1m: '0.000000000001', outputUsdPer1m: '0' }] }, { input: 1, output: 0 })).toBe('0.000000000000000002');
    expect(pricing.estimate({ tier: 'fast' }, { input: 0, output: 0 })).toBe('0');
  });
});

function pricingJson() {
  return {
    version: 'v',
    tiers: {
      fast: { model: 'service/fast', input_usd_per_1m: '0.10', output_usd_per_1m: '0.40' },
      balanced: { model: 'service/balanced', input_usd_per_1m: '0.50', output_usd_per_1m: '2.00' },
    },
    default_plan: 'payg',
    plans: { payg: { name: 'PAYG', monthly_fee_usd: '0', discounts: { fast_pct: '0', balanced_pct: '0', passthrough_markup_pct: '5', byok_fee_pct: '5' } } },
  };
}
