import { servicePorts } from '@switchboard/contracts/components';
import { readInt, serviceUrl } from '@switchboard/runtime/config';

/**
 * The settings of the conversations service (docs/operations.md), read once at start by main.ts
 * and passed down; a malformed value stops the start, naming its variable. The model catalog
 * (SWITCHBOARD_MODELS_FILE) is read by ModelCatalog.load.
 */
export interface ConversationsConfig {
  /** ROUTING_SEED: a fixed seed for the routing sampler (tests); random when unset. */
  routingSeed?: number;
  /** BILLING_URL: where the billing service answers. */
  billingUrl: string;
}

export function readConversationsConfig(env: Record<string, string | undefined> = process.env): ConversationsConfig {
  return {
    routingSeed: env.ROUTING_SEED ? readInt('ROUTING_SEED', 0, env) : undefined,
    billingUrl: serviceUrl('billing', servicePorts.billing, env),
  };
}
