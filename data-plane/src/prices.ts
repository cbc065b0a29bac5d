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

  /** The most `tokens` can cost through a service tier or, passthrough, a catalog model. */
  async estimate(target: { tier: ServiceTier } | { model: CatalogModel }, tokens: { input: number; output: number }): Promise<string> {
    const list = await this.priceList();
    let input: Money;
    let output: Money;
    if ('tier' in target) {
      const price = list.tiers.get(target.tier);
      if (!price) throw new Error(`billing has no price for the ${target.tier} tier`);
      ({ input, output } = price);
    } else {
      const factor = list.markup.div(100).plus(1);
      input = new Money(target.model.inputUsdPer1m).mul(factor);
      output = new Money(target.model.outputUsdPer1m).mul(factor);
    }
    // Rounded up: a reservation is never below the cost (AuthorizeKey takes 18 decimals at most).
    return input.mul(tokens.input).plus(output.mul(tokens.output)).div(perMillion).toDecimalPlaces(18, Money.ROUND_UP).toFixed();
  }
}

/** What the upstream charges for a generation: the catalog's prices (SPEC §12). */
export function upstreamCost(model: CatalogModel, tokens: { input: number; output: number }): string {
  return new Money(model.inputUsdPer1m)
    .mul(tokens.input)
    .plus(new Money(model.outputUsdPer1m).mul(tokens.output))
    .div(perMillion)
    .toDecimalPlaces(18)
    .toFixed();
}
