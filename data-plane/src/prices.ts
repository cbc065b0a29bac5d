import type { Client } from '@connectrpc/connect';
import type { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { CatalogModel, ServiceTier } from '@switchboard/runtime/model-catalog';
import { Money } from '@switchboard/runtime/money';

/**
 * What a request may cost before it is made: the amount AuthorizeKey reserves against the key's
 * cap. An upper bound (tier prices before discounts, the largest passthrough markup), so that
 * concurrent requests cannot settle above the cap; the settled cost is billing's. The price list
 * is billing's, cached for a minute.
 */

interface PriceList {
  tiers: Map<string, { input: Money; output: Money }>;
  markup: Money;
}

const cacheMs = 60_000;
const perMillion = new Money(1_000_000);

export class Prices {
  private list?: { value: PriceList; at: number };
  private loading?: Promise<PriceList>;

  constructor(private readonly billing: Client<typeof UsageService>) {}

  private async priceList(): Promise<PriceList> {
    if (this.list && Date.now() - this.list.at < cacheMs) return this.list.value;
    // An old list keeps serving while a new one is fetched, and while billing cannot answer.
    if (this.list) {
      this.refresh().catch(() => undefined);
      return this.list.value;
    }
    return this.refresh();
  }

  private refresh(): Promise<PriceList> {
    this.loading ??= this.billing
      .getPriceList({}, { timeoutMs: 5000 })
      .then((answer) => {
        const value: PriceList = {
          tiers: new Map(answer.tiers.map((tier) => [tier.tier, { input: new Money(tier.inputUsdPer1m), output: new Money(tier.outputUsdPer1m) }])),
          markup: new Money(answer.maxPassthroughMarkupPct || '0'),
        };
        this.list = { value, at: Date.now() };
        return value;
      })
      .finally(() => {
        this.loading = undefined;
      });
    return this.loading;
  }

  /**
   * The most `tokens` can cost through a service tier or, passthrough, through any of the catalog
   * models of that id (the region is chosen after the reservation).
   */
  async estimate(target: { tier: ServiceTier } | { models: CatalogModel[] }, tokens: { input: number; output: number }): Promise<string> {
    const list = await this.priceList();
    const costOf = (input: Money, output: Money) => input.mul(tokens.input).plus(output.mul(tokens.output)).div(perMillion);
    let cost: Money;
    if ('tier' in target) {
      const price = list.tiers.get(target.tier);
      if (!price) throw new Error(`billing has no price for the ${target.tier} tier`);
      cost = costOf(price.input, price.output);
    } else {
      const factor = list.markup.div(100).plus(1);
      cost = Money.max(...target.models.map((model) => costOf(new Money(model.inputUsdPer1m).mul(factor), new Money(model.outputUsdPer1m).mul(factor))));
    }
    // Rounded up: a reservation is never below the cost (AuthorizeKey takes 18 decimals at most).
    return cost.toDecimalPlaces(18, Money.ROUND_UP).toFixed();
  }
}

/** What the upstream charges for a generation: the catalog's prices (docs/api/front-door.md#the-model-catalog). */
export function upstreamCost(model: CatalogModel, tokens: { input: number; output: number }): string {
  return new Money(model.inputUsdPer1m)
    .mul(tokens.input)
    .plus(new Money(model.outputUsdPer1m).mul(tokens.output))
    .div(perMillion)
    .toDecimalPlaces(18)
    .toFixed();
}
