import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, type HandlerContext } from '@connectrpc/connect';
import type { CurrentKeySchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { callerOf } from '@switchboard/runtime/call-context';
import type { Knex } from '@switchboard/runtime/db';
import { apiError } from '@switchboard/runtime/errors';
import { allowedModelsOf, keyNotFound, rateLimitsOf } from './key-record.js';
import { monthOf } from './months.js';
import { budgetStatuses } from './store/budget-spend.js';
import { budgetOf, findKey } from './store/keys.js';

export type CurrentKeyRecord = MessageInitShape<typeof CurrentKeySchema>;

/**
 * GET /v1/key (docs/api/keys.md#introspection): the API key of the request as it may use itself,
 * with each of its budgets where it stands now. The key is the one the gateway authenticated (the
 * mesh token's key id); a user's access token has none, and is a 400 `api_key_required`.
 */
export async function currentKey(db: Knex, ctx: HandlerContext, now: Date): Promise<CurrentKeyRecord> {
  const claims = callerOf(ctx);
  if (claims.principalType !== 'key' || !claims.keyId) {
    throw apiError(Code.InvalidArgument, 'api_key_required', 'GET /v1/key describes the API key of the request: call it with an API key, not an access token.');
  }
  const row = await findKey(db, claims.keyId, claims.workspaceId ?? '', monthOf(now));
  // Cannot happen for a key the gateway authenticated (keys are never deleted); a 404 rather than a guess.
  if (!row) throw keyNotFound();
  const budgets = await budgetStatuses(db, { budgetId: budgetOf(row), keyId: row.id }, row.monthly_spend_cap_usd, now);
  return {
    keyId: row.id,
    name: row.name,
    scopes: row.scopes,
    expiresAt: row.expires_at ? timestampFromDate(row.expires_at) : undefined,
    allowedModels: allowedModelsOf(row),
    rateLimits: rateLimitsOf(row),
    routingPolicy: row.routing_policy,
    spend: budgets.map((budget) => ({
      period: budget.period,
      limitUsd: budget.amountUsd,
      spendUsd: budget.spendUsd,
      remainingUsd: budget.remainingUsd,
      resetsAt: budget.resetsAt ? timestampFromDate(budget.resetsAt) : undefined,
    })),
  };
}
