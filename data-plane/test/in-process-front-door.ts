import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@connectrpc/connect';
import type { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { BudgetLeases, type LeaseOwner } from '@switchboard/data-plane/budget-leases';
import { Completions } from '@switchboard/data-plane/completions';
import { KeyReplica } from '@switchboard/data-plane/key-replica';
import type { BalanceFacts, CapFacts, RateFacts } from '@switchboard/data-plane/lease-owners';
import { Prices } from '@switchboard/data-plane/prices';
import { RateLimiter, rateLeases } from '@switchboard/data-plane/rate-limits';
import { RoutingReplica } from '@switchboard/data-plane/routing-replica';
import { createHandler } from '@switchboard/data-plane/server';
import { WorkPublisher } from '@switchboard/data-plane/work-publisher';
import { createLogger } from '@switchboard/runtime/log';
import { Metrics } from '@switchboard/runtime/metrics';
import type { ModelCatalog, Region } from '@switchboard/runtime/model-catalog';
import { defaultPricingPath, Pricing } from '@switchboard/runtime/pricing';

/**
 * The front door's server in this process, for tests of what it decides itself: the real
 * Completions and handler on loopback, with the owners of leases and the key states given by the
 * test (no keys or billing service), and the work stream a list of the records published.
 */

/** An owner that sets no limit: every lease is "unlimited" with these facts. */
export const unlimitedOwner = <Facts>(facts: Facts): LeaseOwner<Facts> => ({
  lease: async () => ({ leaseId: '', grantedUsd: '0', expiresAt: new Date(Date.now() + 1000), unlimited: true, facts }),
  release: async () => {},
});

export interface InProcessFrontDoorOptions {
  catalog: ModelCatalog;
  /** ListKeyStates, as the keys service answers it. */
  keys: Pick<Client<typeof KeyService>, 'listKeyStates'>;
  workspaceOwner?: LeaseOwner<CapFacts>;
  rateOwner?: LeaseOwner<RateFacts>;
  demoRegions?: ReadonlySet<Region>;
}

export interface InProcessFrontDoor {
  base: string;
  /** The usage records and exchanges published to the work stream, in order. */
  published: Uint8Array[];
  pricing: Pricing;
  close(): Promise<void>;
}

export async function startInProcessFrontDoor(options: InProcessFrontDoorOptions): Promise<InProcessFrontDoor> {
  const log = createLogger('data-plane', 'silent');
  const pricing = Pricing.load(defaultPricingPath);
  const published: Uint8Array[] = [];
  const replica = new KeyReplica({ log, keys: options.keys as Client<typeof KeyService>, refreshMs: 60_000, maxStaleMs: 120_000 });
  await replica.start();
  const completions = new Completions({
    log,
    catalog: options.catalog,
    prices: new Prices(pricing),
    pricing,
    keys: replica,
    caps: new BudgetLeases({ name: 'cap', log, owner: unlimitedOwner<CapFacts>({ spendUsd: '0' }) }),
    workspaces: new BudgetLeases({ name: 'workspace budget', log, owner: options.workspaceOwner ?? unlimitedOwner<CapFacts>({ spendUsd: '0' }) }),
    rates: new RateLimiter(rateLeases(log, () => options.rateOwner ?? unlimitedOwner<RateFacts>({ limit: 0, remaining: 0, resetsAt: new Date() }))),
    balances: new BudgetLeases({
      name: 'balance',
      log,
      owner: unlimitedOwner<BalanceFacts>({ balanceUsd: '100', planId: pricing.defaultPlan, pricingVersion: pricing.version }),
    }),
    routing: new RoutingReplica({ log, catalog: options.catalog, routing: {} as never, refreshMs: 60_000 }),
    conversations: undefined as never,
    publisher: new WorkPublisher({
      log,
      js: {
        publish: async (_subject: string, data: Uint8Array) => {
          published.push(data);
          return { seq: published.length, duplicate: false, stream: 'work' };
        },
      } as never,
      maxQueued: 100,
    }),
    subjects: { usage: 'test.usage', exchanges: 'test.exchanges' },
    settings: {
      headersTimeoutMs: 5000,
      idleTimeoutMs: 5000,
      streamMaxDurationMs: 60_000,
      defaultMaxTokens: 100,
      upstreamApiKeys: {},
      demoRegions: options.demoRegions ?? new Set(),
    },
  });
  const server = http.createServer(createHandler({ log, metrics: new Metrics('data-plane'), completions, lifecycle: { ready: true, draining: false } }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    published,
    pricing,
    async close() {
      await replica.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
