import type { ModelCatalog, Region, ServiceTier } from '@switchboard/runtime/model-catalog';
import { allModels, type ModelAllowList } from '@switchboard/runtime/model-patterns';
import { Money } from '@switchboard/runtime/money';
import type { Pricing } from '@switchboard/runtime/pricing';

/**
 * `GET /v1/models` (docs/api/front-door.md#the-model-list): OpenAI's model list, the service
 * tiers first, then each model of the catalog once, whatever its regions, with what the caller's
 * plan pays for it and whether the demo upstream answers it. Only what the key may use is listed
 * (docs/api/front-door.md#allowed-models): a concrete model its patterns match, and a tier they
 * match or with a candidate they match (the tier then routes among those).
 */

export interface ListedModel {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  /** A catalog model's region; absent for a service tier, and for an id served in several regions. */
  region?: Region;
  /** The service tiers the entry is (a candidate of). */
  tiers: ServiceTier[];
  pricing: { input_usd_per_1m: string; output_usd_per_1m: string };
  /** An answer may come from the demo upstream (DEMO_UPSTREAM): some region it is served in has no key. */
  demo: boolean;
}

/** A fixed date: the catalog says nothing of when a model was created. */
const created = 1_700_000_000;

export function modelList(
  catalog: ModelCatalog,
  pricing: Pricing,
  planId: string,
  demoRegions: ReadonlySet<Region>,
  allows: ModelAllowList = allModels,
): { object: 'list'; data: ListedModel[] } {
  const tiers = (['fast', 'balanced'] as const).flatMap((tier): ListedModel[] => {
    const id = `service/${tier}`;
    const candidates = allows(id) ? catalog.candidates(tier) : catalog.candidates(tier).filter((model) => allows(model.id));
    if (candidates.length === 0 && !allows(id)) return [];
    const prices = pricing.pricesPer1m({ tier }, planId);
    return [
      {
        id,
        object: 'model',
        created,
        owned_by: 'switchboard',
        tiers: [tier],
        pricing: { input_usd_per_1m: prices.inputUsdPer1m, output_usd_per_1m: prices.outputUsdPer1m },
        demo: candidates.some((model) => demoRegions.has(model.region)),
      },
    ];
  });
  const models = [...new Set(catalog.models.map((model) => model.id))].filter(allows).map((id): ListedModel => {
    const entries = catalog.models.filter((model) => model.id === id);
    const prices = entries.map((model) => pricing.pricesPer1m({ model }, planId));
    const demo = entries.some((model) => demoRegions.has(model.region));
    return {
      id,
      object: 'model',
      created,
      owned_by: demo ? 'switchboard-demo' : 'upstream',
      ...(entries.length === 1 ? { region: entries[0].region } : {}),
      tiers: [...new Set(entries.flatMap((model) => model.tiers))],
      // Served in several regions: the most a call can cost, as the estimate reserves.
      pricing: {
        input_usd_per_1m: Money.max(...prices.map((p) => p.inputUsdPer1m)).toFixed(),
        output_usd_per_1m: Money.max(...prices.map((p) => p.outputUsdPer1m)).toFixed(),
      },
      demo,
    };
  });
  return { object: 'list', data: [...tiers, ...models] };
}
