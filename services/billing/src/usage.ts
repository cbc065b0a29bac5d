import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import type { GenerationSchema, RecordUsageResponseSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { UsageRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { formatMoney, parsePlainDecimal } from '@switchboard/runtime/money';
import { Pricing, type Tier } from '@switchboard/runtime/pricing';
import type { EventWriter } from '@switchboard/runtime/service';
import type { Accounts } from './accounts.js';
import { optionalId, requiredId, tokenCount } from './fields.js';
import type { KeyDirectory } from './key-directory.js';
import type { Ledger } from './ledger.js';
import { lockAccounts } from './store/accounts.js';
import { findUsageByGeneration, insertUsages, type UsageRow } from './store/usage.js';

/**
 * Usage from the data plane (docs/api/billing.md#usage-ingestion, docs/api/internal-calls.md#recordusage): each generation is priced once, under the
 * workspace's plan, and recorded with its debit and its `billing.usage.recorded` event in one
 * transaction (the outbox: a crash cannot leave a debit without its event, or the reverse).
 * Idempotent by generation_id: the unique index decides, so concurrent repeats charge once and
 * answer the first result with `duplicate: true` (a repeat is checked like a first call: a retry
 * must be the same request).
 */

export interface UsageInput {
  generationId: string;
  keyId: string;
  workspaceId: string;
  model: string;
  routedModel?: string;
  inputTokens: bigint;
  outputTokens: bigint;
  upstreamCostUsd?: string;
  byok?: boolean;
  occurredAt?: Date;
  reservationId?: string;
  requestId?: string;
}

export type UsageAnswer = MessageInitShape<typeof RecordUsageResponseSchema>;

export interface UsageLedgerDeps {
  db: Knex;
  pricing: Pricing;
  accounts: Accounts;
  ledger: Ledger;
  keys: KeyDirectory;
  recordEvent: EventWriter;
  clock?: Clock;
  /** Resolves once the usage published before the call is settled (a generation just answered is found). */
  usageSettled?: () => Promise<unknown>;
}

/** Usage may be reported late (a retried call), never from the future beyond clock skew. */
const maxFutureSkewMs = 5 * 60_000;

const answerOf = (row: UsageRow, duplicate: boolean): UsageAnswer => ({ usageId: row.id, costUsd: row.cost_usd, tier: row.tier, duplicate });

export class UsageLedger {
  constructor(private readonly deps: UsageLedgerDeps) {}

  async record(input: UsageInput): Promise<UsageAnswer> {
    const { db, pricing, accounts, recordEvent } = this.deps;
    const generationId = requiredId(input.generationId, 'generation_id');
    const keyId = requiredId(input.keyId, 'key_id');
    const workspaceId = requiredId(input.workspaceId, 'workspace_id');
    const model = requiredId(input.model, 'model');
    const routedModel = optionalId(input.routedModel, 'routed_model') ?? null;
    const inputTokens = tokenCount(input.inputTokens, 'input_tokens');
    const outputTokens = tokenCount(input.outputTokens, 'output_tokens');
    const upstreamCostUsd = input.upstreamCostUsd === undefined ? undefined : parsePlainDecimal(input.upstreamCostUsd, 'upstream_cost_usd');
    const tier: Tier = pricing.tierOf(model, input.byok ?? false);
    if (Pricing.needsUpstreamCost(tier) && upstreamCostUsd === undefined) {
      throw invalidArgument(
        'upstream_cost_usd',
        `upstream_cost_usd is required for the ${tier} tier (its price is the upstream cost ${tier === 'byok' ? 'fee' : 'plus the markup'}).`,
      );
    }
    const now = (this.deps.clock ?? systemClock)();
    const occurredAt = input.occurredAt ?? now;
    if (occurredAt.getTime() > now.getTime() + maxFutureSkewMs) throw invalidArgument('occurred_at', 'occurred_at is in the future.');

    const owner = await this.deps.keys.workspaceOf(keyId);
    if (!owner) throw invalidArgument('key_id', 'key_id names no key.');
    if (owner !== workspaceId) throw invalidArgument('workspace_id', 'workspace_id is not the workspace of the key.');
    const planId = await accounts.planOf(workspaceId);
    const costUsd = formatMoney(pricing.cost({ tier, inputTokens, outputTokens, upstreamCostUsd }, planId));
    const usageId = newId('usg');

    const recorded = await db.transaction(async (trx) => {
      await lockAccounts(trx, [workspaceId]);
      const inserted = await insertUsages(trx, [
        {
          id: usageId,
          generationId,
          workspaceId,
          keyId,
          model,
          routedModel,
          tier,
          inputTokens: inputTokens.toString(),
          outputTokens: outputTokens.toString(),
          upstreamCostUsd: upstreamCostUsd ?? null,
          costUsd,
          planId,
          pricingVersion: pricing.version,
          reservationId: input.reservationId || null,
          occurredAt,
        },
      ]);
      if (!inserted.has(generationId)) return false;
      const balance = (await this.deps.ledger.postUsage(trx, [{ workspaceId, tier, amountUsd: costUsd }])).get(workspaceId)!;
      await recordEvent(trx, UsageRecordedSchema, {
        workspaceId,
        data: {
          usageId,
          generationId,
          keyId,
          workspaceId,
          model,
          routedModel: routedModel ?? undefined,
          tier,
          costUsd,
          inputTokens,
          outputTokens,
          occurredAt: timestampFromDate(occurredAt),
          reservationId: input.reservationId || undefined,
          balanceUsd: balance.afterUsd,
          balanceVersion: BigInt(balance.version),
        },
        requestId: input.requestId,
      });
      return true;
    });
    if (recorded) return { usageId, costUsd, tier, duplicate: false };
    // A concurrent call with the same generation id won: answer its result.
    const winner = await findUsageByGeneration(db, generationId);
    if (!winner) throw apiError(Code.Aborted, 'conflict', 'The generation was being recorded concurrently; retry.');
    return answerOf(winner, true);
  }

  /**
   * A generation of `workspaceId`, for feedback. Another workspace's is refused apart from an
   * unknown id (permission_denied, not not_found), so the conversations service records the probe
   * (docs/api/audit.md, `access.denied`) while its client gets the same 404 as for an unknown id.
   */
  async generation(generationId: string, workspaceId: string): Promise<MessageInitShape<typeof GenerationSchema>> {
    requiredId(generationId, 'generation_id');
    requiredId(workspaceId, 'workspace_id');
    let row = await findUsageByGeneration(this.deps.db, generationId);
    // Feedback may name a generation answered a moment ago whose usage is still being settled.
    if (!row && this.deps.usageSettled) {
      await this.deps.usageSettled();
      row = await findUsageByGeneration(this.deps.db, generationId);
    }
    if (!row) throw apiError(Code.NotFound, 'generation_not_found', 'No such generation in this workspace.');
    if (row.workspace_id !== workspaceId)
      throw apiError(Code.PermissionDenied, 'generation_of_another_workspace', 'The generation belongs to another workspace.');
    return {
      generationId: row.generation_id,
      usageId: row.id,
      workspaceId: row.workspace_id,
      keyId: row.key_id,
      model: row.model,
      routedModel: row.routed_model ?? undefined,
      tier: row.tier,
      occurredAt: timestampFromDate(row.occurred_at),
    };
  }
}
