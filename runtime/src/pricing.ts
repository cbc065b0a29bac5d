import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CatalogModel, ServiceTier } from './model-catalog.js';
import { Money } from './money.js';

/**
 * Prices (docs/api/billing.md#tiers-and-prices) from one versioned pricing file: flat per-token
 * prices of the service tiers, and plans that discount them and set the passthrough markup and the
 * byok fee. Whoever prices usage (the component that debits it, and the data plane that answers
 * its cost and reserves its estimate) loads the same file with this module, so a request's cost
 * is the same number wherever it is computed. The file is `SWITCHBOARD_PRICING_FILE`, else the
 * default shipped beside the runtime (`runtime/pricing.json`). Every amount is a decimal string
 * and every computation decimal.js; costs stay unrounded.
 */

export const defaultPricingPath = fileURLToPath(new URL('../../pricing.json', import.meta.url));

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

/** The list prices of the service tiers and the largest markup: what any plan's request costs at most. */
export interface PriceList {
  version: string;
  tiers: Array<{ tier: ServiceTier; inputUsdPer1m: string; outputUsdPer1m: string }>;
  maxPassthroughMarkupPct: string;
}

/** A model's upstream prices, USD per 1M tokens (the catalog's). */
export type ModelPrices = Pick<CatalogModel, 'inputUsdPer1m' | 'outputUsdPer1m'>;

/** What is priced: token counts, and the upstream cost for passthrough and byok. */
export interface Priced {
  tier: Tier;
  inputTokens: bigint;
  outputTokens: bigint;
  upstreamCostUsd?: string;
}

const decimal = /^\d+(\.\d+)?$/;
const perMillion = new Money(1_000_000);

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
  /** The largest passthrough markup of any plan, as the file states it. */
  private readonly maxMarkupPct: string;

  private constructor(
    readonly version: string,
    readonly defaultPlan: string,
    private readonly tierPrices: Record<ServiceTier, TierPrice>,
    private readonly planList: PlanPricing[],
  ) {
    this.maxMarkupPct = planList.map((plan) => plan.discounts.passthroughMarkupPct).reduce((max, pct) => (new Money(pct).greaterThan(max) ? pct : max));
  }

  /** Reads and checks the pricing file; errors name the file's field. */
  static parse(json: string): Pricing {
    const raw = JSON.parse(json) as Record<string, unknown>;
    const tiersRaw = (raw.tiers ?? {}) as Record<string, Record<string, unknown>>;
    const tierPrice = (tier: ServiceTier): TierPrice => ({
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
   * What a request's cost can be estimated with before it is made: the service tiers' prices as
   * the file states them (before any plan discount), and the largest passthrough markup of any
   * plan (as the file states it). Upper bounds of what a request can cost under any plan.
   */
  priceList(): PriceList {
    return {
      version: this.version,
      tiers: (['fast', 'balanced'] as const).map((tier) => ({
        tier,
        inputUsdPer1m: this.tierPrices[tier].inputUsdPer1m,
        outputUsdPer1m: this.tierPrices[tier].outputUsdPer1m,
      })),
      maxPassthroughMarkupPct: this.maxMarkupPct,
    };
  }

  /**
   * The most `tokens` can cost under any plan (the price list's bounds) through a service tier or,
   * passthrough, through any of `models` (the catalog's models of the requested id: the region is
   * chosen after the reservation). Rounded up to 18 decimals, the most a reservation carries, so
   * it is never below the cost.
   */
  estimate(target: { tier: ServiceTier } | { models: readonly ModelPrices[] }, tokens: { input: number; output: number }): string {
    const costOf = (input: Money, output: Money) => input.mul(tokens.input).plus(output.mul(tokens.output)).div(perMillion);
    let cost: Money;
    if ('tier' in target) {
      const price = this.tierPrices[target.tier];
      cost = costOf(new Money(price.inputUsdPer1m), new Money(price.outputUsdPer1m));
    } else {
      if (target.models.length === 0) throw new Error('estimate: no model to price');
      const factor = new Money(this.maxMarkupPct).div(100).plus(1);
      cost = Money.max(...target.models.map((model) => costOf(new Money(model.inputUsdPer1m).mul(factor), new Money(model.outputUsdPer1m).mul(factor))));
    }
    return cost.toDecimalPlaces(18, Money.ROUND_UP).toFixed();
  }

  /**
   * What `planId` pays per 1M tokens through a service tier (its price less the plan's discount)
   * or, passthrough, through a catalog model (its price plus the plan's markup): the prices
   * `cost` bills, as the model list shows them (docs/api/front-door.md#the-model-list).
   */
  pricesPer1m(target: { tier: ServiceTier } | { model: ModelPrices }, planId: string): ModelPrices {
    const { discounts } = this.plan(planId);
    const factor =
      'tier' in target
        ? new Money(1).minus(new Money(target.tier === 'fast' ? discounts.fastPct : discounts.balancedPct).div(100))
        : new Money(discounts.passthroughMarkupPct).div(100).plus(1);
    const prices = 'tier' in target ? this.tierPrices[target.tier] : target.model;
    return { inputUsdPer1m: factor.mul(prices.inputUsdPer1m).toFixed(), outputUsdPer1m: factor.mul(prices.outputUsdPer1m).toFixed() };
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
