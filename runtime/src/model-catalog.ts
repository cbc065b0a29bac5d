import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The model catalog of docs/api/front-door.md#routes: regions (upstream base URL and the variable holding its API
 * key) and models (region, the service tiers they are candidates for, prices per 1M tokens). One
 * JSON file, read by the conversations service (RouteModel's candidates) and the data plane
 * (upstreams, prices): `SWITCHBOARD_MODELS_FILE`, else the default shipped beside the runtime
 * (`runtime/models.json`, a starting point to copy and edit). A malformed catalog is refused at
 * start-up with the entry it is about.
 */

export const regions = ['cn', 'overseas'] as const;
export type Region = (typeof regions)[number];
export const serviceTiers = ['fast', 'balanced'] as const;
export type ServiceTier = (typeof serviceTiers)[number];

export interface CatalogRegion {
  baseUrl: string;
  apiKeyEnv: string;
}

export interface CatalogModel {
  id: string;
  region: Region;
  tiers: ServiceTier[];
  inputUsdPer1m: string;
  outputUsdPer1m: string;
}

export class CatalogError extends Error {}

/** The geographic routing policies of API keys (docs/api/keys.md#routing-policy). */
export const routingPolicies = ['cn-only', 'overseas-only', 'any'] as const;
export type RoutingPolicy = (typeof routingPolicies)[number];

/** Whether a key with `policy` may be served from `region`. */
export function policyAllows(policy: RoutingPolicy, region: Region): boolean {
  return policy === 'any' || (policy === 'cn-only' ? region === 'cn' : region !== 'cn');
}

const decimal = /^\d+(\.\d+)?$/;
export const defaultCatalogPath = fileURLToPath(new URL('../../models.json', import.meta.url));

function fail(where: string, problem: string): never {
  throw new CatalogError(`model catalog: ${where} ${problem}`);
}

function object(value: unknown, where: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(where, 'must be an object');
  return value as Record<string, unknown>;
}

function text(value: unknown, where: string): string {
  if (typeof value !== 'string' || value.trim() === '') fail(where, 'must be a non-empty string');
  return value as string;
}

export class ModelCatalog {
  private constructor(
    readonly regions: ReadonlyMap<Region, CatalogRegion>,
    readonly models: readonly CatalogModel[],
  ) {}

  static parse(json: string, source = 'the catalog'): ModelCatalog {
    let raw: unknown;
    try {
      raw = JSON.parse(json);
    } catch (err) {
      throw new CatalogError(`model catalog: ${source} is not JSON (${(err as Error).message})`);
    }
    const root = object(raw, 'the root');
    const regionMap = new Map<Region, CatalogRegion>();
    for (const [name, value] of Object.entries(object(root.regions, 'regions'))) {
      const where = `regions.${name}`;
      if (!(regions as readonly string[]).includes(name)) fail(where, `is not a region (${regions.join(', ')})`);
      const region = object(value, where);
      const baseUrl = text(region.base_url, `${where}.base_url`);
      try {
        const url = new URL(baseUrl);
        if (url.protocol !== 'https:' && url.protocol !== 'http:') fail(`${where}.base_url`, 'must be an http(s) URL');
      } catch (err) {
        if (err instanceof CatalogError) throw err;
        fail(`${where}.base_url`, 'is not a URL');
      }
      const apiKeyEnv = text(region.api_key_env, `${where}.api_key_env`);
      if (!/^[A-Z_][A-Z0-9_]*$/.test(apiKeyEnv)) fail(`${where}.api_key_env`, 'must be an environment variable name');
      regionMap.set(name as Region, { baseUrl, apiKeyEnv });
    }
    if (!Array.isArray(root.models)) fail('models', 'must be an array');
    const seen = new Set<string>();
    const models = (root.models as unknown[]).map((value, index): CatalogModel => {
      const where = `models[${index}]`;
      const model = object(value, where);
      const id = text(model.id, `${where}.id`);
      const region = text(model.region, `${where}.region`) as Region;
      if (!regionMap.has(region)) fail(`${where}.region`, `names no region of the catalog (${[...regionMap.keys()].join(', ')})`);
      if (seen.has(`${region}|${id}`)) fail(where, `repeats ${id} in ${region} (a model appears once per region)`);
      seen.add(`${region}|${id}`);
      const tiers = model.tiers ?? [];
      if (!Array.isArray(tiers) || tiers.some((tier) => !(serviceTiers as readonly unknown[]).includes(tier))) {
        fail(`${where}.tiers`, `must list service tiers (${serviceTiers.join(', ')})`);
      }
      const price = (name: string) => {
        const value = model[name];
        if (typeof value !== 'string' || !decimal.test(value)) fail(`${where}.${name}`, 'must be a decimal string such as "0.15"');
        return value as string;
      };
      return { id, region, tiers: [...new Set(tiers as ServiceTier[])], inputUsdPer1m: price('input_usd_per_1m'), outputUsdPer1m: price('output_usd_per_1m') };
    });
    return new ModelCatalog(regionMap, models);
  }

  /** The catalog of `SWITCHBOARD_MODELS_FILE`, else the shipped default. */
  static load(path = process.env.SWITCHBOARD_MODELS_FILE || defaultCatalogPath): ModelCatalog {
    let json: string;
    try {
      json = readFileSync(path, 'utf8');
    } catch (err) {
      throw new CatalogError(`model catalog: cannot read ${path} (${(err as Error).message})`);
    }
    return ModelCatalog.parse(json, path);
  }

  /** The candidates of a service tier (models listing it), in catalog order. */
  candidates(tier: ServiceTier): CatalogModel[] {
    return this.models.filter((model) => model.tiers.includes(tier));
  }
}
