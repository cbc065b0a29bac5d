import type { SwitchboardClient } from '@switchboard/sdk';

/*
 * The billing service's generations and price list, which the SDK's schema
 * does not describe yet: typed here, as the API documents them, until `npm run gen` adds them to
 * sdk/src/schema.ts; then the pages call `client.get` with the SDK's types and this file goes
 * (docs/decisions.md#dashboard-pages).
 */

/** A model request as billing recorded it; the data plane's facts are null on records made before it sent them. */
export interface Generation {
  generation_id: string;
  key_id: string;
  model: string;
  routed_model: string;
  tier: string;
  region: string | null;
  input_tokens: number;
  output_tokens: number;
  cost_usd: string;
  upstream_cost_usd: string | null;
  streamed: boolean | null;
  status: string | null;
  latency_ms: number | null;
  time_to_first_token_ms: number | null;
  overhead_ms: number | null;
  conversation_id: string | null;
  feedback: { rating: number; tags: string[] } | null;
  created_at: string;
}

export interface GenerationPage {
  data: Generation[];
  has_more: boolean;
  next_cursor: string | null;
}

export interface PriceList {
  version: string;
  tiers: { tier: string; input_usd_per_1m: string; output_usd_per_1m: string }[];
  models: { id: string; region: string; tiers: string[]; input_usd_per_1m: string; output_usd_per_1m: string }[];
}

interface PendingRoutes {
  '/v1/generations': { query: { limit?: number; after?: string; key_id?: string }; answer: GenerationPage };
  '/v1/billing/prices': { query: Record<string, never>; answer: PriceList };
}

/** GET one of the routes above through the SDK client (its credentials, workspace header and errors), typed by this file. */
export function getPending<Path extends keyof PendingRoutes>(
  client: SwitchboardClient,
  path: Path,
  query?: PendingRoutes[Path]['query'],
): Promise<PendingRoutes[Path]['answer']> {
  const get = client.get as unknown as (url: string, init?: { params: { query?: object } }) => Promise<PendingRoutes[Path]['answer']>;
  return get(path, query ? { params: { query } } : undefined);
}
