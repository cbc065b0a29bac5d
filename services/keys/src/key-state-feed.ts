import type { MessageInitShape } from '@bufbuild/protobuf';
import type { KeyStateSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { rateLimitsOf } from './key-record.js';
import { listKeyStatesAfter } from './store/keys.js';

/**
 * The key states a data plane replica keeps in memory (docs/money-path.md#replicas), as a feed:
 * every key whose standing changed after the version the replica holds, in version order. A
 * version is visible only once every lower one is (migrations/004), so paging by it misses nothing.
 */

export const defaultStatesLimit = 1000;
export const maxStatesLimit = 5000;

/** A ListKeyStatesResponse. */
export interface KeyStatesPage {
  states: Array<MessageInitShape<typeof KeyStateSchema>>;
  version: bigint;
  hasMore: boolean;
}

export class KeyStateFeed {
  constructor(private readonly deps: { db: Knex }) {}

  /** ListKeyStates: `limit` 0 means the default (1000). */
  async list(afterVersion: bigint, limit: number): Promise<KeyStatesPage> {
    if (afterVersion < 0n) throw invalidArgument('after_version', 'after_version must be 0 or a version a previous answer gave.');
    if (limit < 0 || limit > maxStatesLimit) throw invalidArgument('limit', `limit must be from 1 to ${maxStatesLimit} (0 for ${defaultStatesLimit}).`);
    const wanted = limit === 0 ? defaultStatesLimit : limit;
    const rows = await listKeyStatesAfter(this.deps.db, afterVersion.toString(), wanted + 1);
    const page = rows.slice(0, wanted);
    return {
      states: page.map((row) => ({
        keyHash: row.key_hash,
        keyId: row.id,
        workspaceId: row.workspace_id,
        status: row.status,
        monthlySpendCapUsd: row.monthly_spend_cap_usd ?? undefined,
        routingPolicy: row.routing_policy,
        version: BigInt(row.state_version),
        scopes: row.scopes,
        expiresAt: row.expires_at ? timestampFromDate(row.expires_at) : undefined,
        allowedModels: row.allowed_models ?? [],
        allModels: row.allowed_models === null,
        rateLimits: rateLimitsOf(row),
        budgetId: row.budget_id,
        spendLimits: row.spend_limits.map((limit) => ({ period: limit.period, amountUsd: limit.amount_usd })),
      })),
      version: page.length > 0 ? BigInt(page[page.length - 1].state_version) : afterVersion,
      hasMore: rows.length > wanted,
    };
  }
}
