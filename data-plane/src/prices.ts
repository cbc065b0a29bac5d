import type { CatalogModel, ServiceTier } from '@switchboard/runtime/model-catalog';
import { Money } from '@switchboard/runtime/money';
import type { Pricing } from '@switchboard/runtime/pricing';

/**
 * What a request may cost before it is made: the amount reserved against the key's cap lease and
 * the workspace's balance lease. An upper bound (tier prices before discounts, the largest
 * passthrough markup), so that concurrent requests cannot settle above what was leased; computed
 * by the shared pricing module from the pricing file billing prices with, without a call.
 */
export class Prices {
  constructor(private readonly pricing: Pricing) {}

  /**
   * The most `tokens` can cost through a service tier or, passthrough, through any of the catalog
   * models of that id (the region is chosen after the reservation).
   */
  estimate(target: { tier: ServiceTier } | { models: CatalogModel[] }, tokens: { input: number; output: number }): string {
    return this.pricing.estimate(target, tokens);
  }
}

/** What the upstream charges for a generation: the catalog's prices (docs/api/front-door.md#the-model-catalog). */
export function upstreamCost(model: CatalogModel, tokens: { input: number; output: number }): string {
  return new Money(model.inputUsdPer1m).mul(tokens.input).plus(new Money(model.outputUsdPer1m).mul(tokens.output)).div(1_000_000).toDecimalPlaces(18).toFixed();
}
