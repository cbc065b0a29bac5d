import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type {
  BalanceSchema,
  GetPlanResponseSchema,
  GetUpgradeHintResponseSchema,
  PricesSchema,
  UsageByTierSchema,
  UsageSchema,
} from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import type { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { Money } from '@switchboard/runtime/money';
import { parseDays } from '@switchboard/runtime/pagination';
import type { PlanPricing, Pricing, Tier } from '@switchboard/runtime/pricing';
import type { Accounts } from './accounts.js';
import { type TierRow, usageByDay, usageByTier } from './store/usage.js';

/**
 * The billing reads of a workspace (docs/api/billing.md#reports): balance, usage per UTC day and per tier over the
 * last `days` (1..365, default 30; today included, days without usage as zeros), the plan, and
 * the upgrade hint: the last 30 days priced under every plan of the pricing file, its monthly fee
 * included; the cheapest other plan is recommended when it costs less than the current one. And
 * the prices the workspace pays under its plan: the service tiers of the pricing file and the
 * models of the model catalog (docs/api/billing.md#prices).
 */

export interface ReportsDeps {
  db: Knex;
  pricing: Pricing;
  accounts: Accounts;
  /** The model catalog the data planes serve (SWITCHBOARD_MODELS_FILE). */
  catalog: ModelCatalog;
  clock?: Clock;
  /**
   * Resolves once the usage the data planes published before the call is settled
   * (docs/money-path.md#usage): a balance or a report shows every request answered before it.
   */
  usageSettled?: () => Promise<unknown>;
}

const dayMs = 24 * 3600 * 1000;
const hintWindowDays = 30;

const isoDate = (at: Date) => at.toISOString().slice(0, 10);

function toPlan(plan: PlanPricing) {
  return {
    planId: plan.planId,
    name: plan.name,
    monthlyFeeUsd: plan.monthlyFeeUsd,
    discounts: {
      fastPct: plan.discounts.fastPct,
      balancedPct: plan.discounts.balancedPct,
      passthroughMarkupPct: plan.discounts.passthroughMarkupPct,
      byokFeePct: plan.discounts.byokFeePct,
    },
  };
}

/** Every tier's cost and requests, zero for a tier `usageOf` has nothing for. */
function tierBreakdown(usageOf: (tier: Tier) => { cost_usd: string; requests: number | string } | undefined) {
  const of = (tier: Tier) => {
    const usage = usageOf(tier);
    return { costUsd: usage ? new Money(usage.cost_usd).toFixed() : '0', requests: BigInt(usage?.requests ?? 0) };
  };
  return { fast: of('fast'), balanced: of('balanced'), passthrough: of('passthrough'), byok: of('byok') };
}

export class Reports {
  constructor(private readonly deps: ReportsDeps) {}

  private now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  async balance(workspaceId: string): Promise<MessageInitShape<typeof BalanceSchema>> {
    await this.deps.usageSettled?.();
    const account = await this.deps.accounts.get(workspaceId);
    return { balanceUsd: account.balanceUsd, currency: 'USD', updatedAt: timestampFromDate(account.updatedAt) };
  }

  /** The first day of a window of `days` days that ends today (UTC). */
  private window(days: number): { from: string; to: string; since: Date } {
    const today = new Date(`${isoDate(this.now())}T00:00:00Z`);
    const since = new Date(today.getTime() - (days - 1) * dayMs);
    return { from: isoDate(since), to: isoDate(today), since };
  }

  async usage(workspaceId: string, rawDays: number | undefined): Promise<MessageInitShape<typeof UsageSchema>> {
    const days = parseDays(rawDays);
    const { from, to } = this.window(days);
    await this.deps.usageSettled?.();
    const rows = await usageByDay(this.deps.db, workspaceId, from, to);
    const total = rows.reduce((sum, row) => sum.plus(row.cost_usd), new Money(0));
    return {
      days,
      totalCostUsd: total.toFixed(),
      data: rows.map((row) => ({
        date: row.date,
        costUsd: new Money(row.cost_usd).toFixed(),
        requests: BigInt(row.requests),
        inputTokens: BigInt(row.input_tokens),
        outputTokens: BigInt(row.output_tokens),
        byTier: tierBreakdown((tier) => row.by_tier[tier]),
      })),
    };
  }

  async usageByTier(workspaceId: string, rawDays: number | undefined): Promise<MessageInitShape<typeof UsageByTierSchema>> {
    const days = parseDays(rawDays);
    await this.deps.usageSettled?.();
    const rows = await usageByTier(this.deps.db, workspaceId, this.window(days).since);
    return { days, byTier: tierBreakdown((tier) => rows.find((row) => row.tier === tier)) };
  }

  async plan(workspaceId: string): Promise<MessageInitShape<typeof GetPlanResponseSchema>> {
    const { planId } = await this.deps.accounts.get(workspaceId);
    return { plan: toPlan(this.deps.pricing.plan(planId)) };
  }

  /** The tier prices less the plan's discounts, and every catalog model (per region) plus the plan's passthrough markup. */
  async prices(workspaceId: string): Promise<MessageInitShape<typeof PricesSchema>> {
    const { pricing, catalog } = this.deps;
    const { planId } = await this.deps.accounts.get(workspaceId);
    return {
      version: pricing.version,
      tiers: (['fast', 'balanced'] as const).map((tier) => ({ tier, ...pricing.pricesPer1m({ tier }, planId) })),
      models: catalog.models.map((model) => ({ id: model.id, region: model.region, tiers: model.tiers, ...pricing.pricesPer1m({ model }, planId) })),
    };
  }

  async upgradeHint(workspaceId: string): Promise<MessageInitShape<typeof GetUpgradeHintResponseSchema>> {
    const { pricing } = this.deps;
    const { planId } = await this.deps.accounts.get(workspaceId);
    const rows = await usageByTier(this.deps.db, workspaceId, new Date(this.now().getTime() - hintWindowDays * dayMs));
    const costUnder = (plan: PlanPricing) => rows.reduce((sum, row) => sum.plus(this.repriced(row, plan.planId)), new Money(plan.monthlyFeeUsd));
    const current = costUnder(pricing.plan(planId));
    if (current.isZero()) return { hint: {} };
    let best: { plan: PlanPricing; cost: Money } | undefined;
    for (const plan of pricing.plans) {
      if (plan.planId === planId) continue;
      const cost = costUnder(plan);
      if (cost.lt(current) && (!best || cost.lt(best.cost))) best = { plan, cost };
    }
    if (!best) return { hint: {} };
    const savingsPct = current.minus(best.cost).div(current).times(100).toDecimalPlaces(1, Money.ROUND_HALF_UP).toNumber();
    return { hint: { recommendPlan: best.plan.planId, savingsPct } };
  }

  /** What the usage of one tier would have cost under `planId` (pricing is linear in its inputs). */
  private repriced(row: TierRow, planId: string): Money {
    return this.deps.pricing.cost(
      { tier: row.tier as Tier, inputTokens: BigInt(row.input_tokens), outputTokens: BigInt(row.output_tokens), upstreamCostUsd: row.upstream_cost_usd },
      planId,
    );
  }
}
