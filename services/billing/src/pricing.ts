import { readFileSync } from 'node:fs';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { PriceListSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { Money } from '@switchboard/runtime/money';

/**
 * Prices (docs/api/billing.md#tiers-and-prices) from one versioned pricing file (`pricing.json` beside the service, or
 * BILLING_PRICING_FILE): flat per-token prices of the service tiers, and plans that discount them
 * and set the passthrough markup and the byok fee. Every amount is a decimal string and every
 * computation decimal.js; costs stay unrounded.
 */

export const tiers = ['fast', 'balanced', 'passthrough', 'byok'] as const;
export type Tier = (typeof tiers)[number];

export interface PlanPricing {
  planId: string;
  name: string;
  monthlyFeeUsd: string;
  discounts: { fastPct: string; balancedPct: string; passthroughMarkupPct: string; byokFeePct: string };
}

interface TierPrice {
  model: string;
  inputUsdPer1m: string;
  outputUsdPer1m: string;
}

/** What is priced: token counts, and the upstream cost for passthrough and byok. */
export interface Priced {
  tier: Tier;
  inputTokens: bigint;
  outputTokens: bigint;
  upstreamCostUsd?: string;
}

const decimal = /^\d+(\.\d+)?$/;

function text(value: unknown, where: string): string {
  if (typeof value !== 'string' || value === '') throw new Error(`pricing file: ${where} must be a non-empty string`);
  return value;
}

function amount(value: unknown, where: string): string {
  const raw = text(value, where);
  if (!decimal.test(raw)) throw new Error(`pricing file: ${where} must be a plain decimal string, got ${JSON.stringify(raw)}`);
  return raw;
}

export class Pricing {
  private constructor(
    readonly version: string,
    readonly defaultPlan: string,
    private readonly tierPrices: Record<'fast' | 'balanced', TierPrice>,
    private readonly planList: PlanPricing[],
  ) {}

  /** Reads and checks the pricing file; errors name the file's field. */
  static parse(json: string): Pricing {
    const raw = JSON.parse(json) as Record<string, unknown>;
    const tiersRaw = (raw.tiers ?? {}) as Record<string, Record<string, unknown>>;
    const tierPrice = (tier: 'fast' | 'balanced'): TierPrice => ({
      model: text(tiersRaw[tier]?.model, `tiers.${tier}.model`),
      inputUsdPer1m: amount(tiersRaw[tier]?.input_usd_per_1m, `tiers.${tier}.input_usd_per_1m`),
      outputUsdPer1m: amount(tiersRaw[tier]?.output_usd_per_1m, `tiers.${tier}.output_usd_per_1m`),
    });
    const plansRaw = (raw.plans ?? {}) as Record<string, Record<string, unknown>>;
    const plans = Object.entries(plansRaw).map(([planId, plan]): PlanPricing => {
      const discounts = (plan.discounts ?? {}) as Record<string, unknown>;
      const pct = (name: string) => amount(discounts[name], `plans.${planId}.discounts.${name}`);
      return {
        planId,
        name: text(plan.name, `plans.${planId}.name`),
        monthlyFeeUsd: amount(plan.monthly_fee_usd, `plans.${planId}.monthly_fee_usd`),
        discounts: {
          fastPct: pct('fast_pct'),
          balancedPct: pct('balanced_pct'),
          passthroughMarkupPct: pct('passthrough_markup_pct'),
          byokFeePct: pct('byok_fee_pct'),
        },
      };
    });
    const defaultPlan = text(raw.default_plan, 'default_plan');
    if (!plans.some((plan) => plan.planId === defaultPlan)) throw new Error(`pricing file: default_plan ${defaultPlan} is not among the plans`);
    return new Pricing(text(raw.version, 'version'), defaultPlan, { fast: tierPrice('fast'), balanced: tierPrice('balanced') }, plans);
  }

  static load(path: string): Pricing {
    return Pricing.parse(readFileSync(path, 'utf8'));
  }

  get plans(): readonly PlanPricing[] {
    return this.planList;
  }

  plan(planId: string): PlanPricing {
    const plan = this.planList.find((p) => p.planId === planId);
    if (!plan) throw new Error(`no plan ${planId} in pricing ${this.version}`);
    return plan;
  }

  /**
   * What the data plane estimates a request's cost with (GetPriceList): the service tiers' prices
   * as the file states them (before any plan discount), and the largest passthrough markup of any
   * plan (as the file states it). Upper bounds of what a request can cost under any plan.
   */
  priceList(): MessageInitShape<typeof PriceListSchema> {
    const serviceTiers = ['fast', 'balanced'] as const;
    const markups = this.planList.map((plan) => plan.discounts.passthroughMarkupPct);
    const maxMarkup = markups.reduce((max, pct) => (new Money(pct).greaterThan(max) ? pct : max));
    return {
      version: this.version,
      tiers: serviceTiers.map((tier) => ({
        tier,
        inputUsdPer1m: this.tierPrices[tier].inputUsdPer1m,
        outputUsdPer1m: this.tierPrices[tier].outputUsdPer1m,
      })),
      maxPassthroughMarkupPct: maxMarkup,
    };
  }

  /** The tier of a request: byok whatever the model; the service tiers by their model id; else passthrough. */
  tierOf(model: string, byok: boolean): Tier {
    if (byok) return 'byok';
    if (model === this.tierPrices.fast.model) return 'fast';
    if (model === this.tierPrices.balanced.model) return 'balanced';
    return 'passthrough';
  }

  /** Whether a tier is priced from the upstream cost (which it then requires). */
  static needsUpstreamCost(tier: Tier): boolean {
    return tier === 'passthrough' || tier === 'byok';
  }

  /** The exact cost of one priced usage under `planId`. */
  cost(usage: Priced, planId: string): Money {
    const { discounts } = this.plan(planId);
    const percent = (pct: string) => new Money(pct).div(100);
    switch (usage.tier) {
      case 'fast':
      case 'balanced': {
        const price = this.tierPrices[usage.tier];
        const off = usage.tier === 'fast' ? discounts.fastPct : discounts.balancedPct;
        return new Money(usage.inputTokens.toString())
          .times(price.inputUsdPer1m)
          .plus(new Money(usage.outputTokens.toString()).times(price.outputUsdPer1m))
          .div(1_000_000)
          .times(new Money(1).minus(percent(off)));
      }
      case 'passthrough':
        return new Money(usage.upstreamCostUsd ?? '0').times(new Money(1).plus(percent(discounts.passthroughMarkupPct)));
      case 'byok':
        return new Money(usage.upstreamCostUsd ?? '0').times(percent(discounts.byokFeePct));
    }
  }
}
