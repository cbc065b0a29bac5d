import { timestampDate } from '@bufbuild/protobuf/wkt';
import { type Client, Code, ConnectError } from '@connectrpc/connect';
import type { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { UsageRecorded } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from '@switchboard/runtime/db';
import { findGeneration, type GenerationRow, rememberGeneration, rememberGenerations } from './store/generations.js';

/** What a lookup found: the workspace's generation, or none, and then whether the id names another workspace's. */
export type GenerationLookup = { generation: GenerationRow } | { generation: undefined; elsewhere: boolean };

/**
 * The generations feedback may rate (docs/api/conversations.md#feedback: a usage record of the caller's workspace): kept
 * from `billing.usage.recorded` events, and asked of billing's registry (GetGeneration) when an
 * event has not arrived yet. The model is the one that served the generation (routed_model for a
 * service tier), which is what its feedback counts for.
 */
export class GenerationDirectory {
  constructor(private readonly deps: { db: Knex; billing: Client<typeof UsageService> }) {}

  /**
   * The generation if it belongs to `workspaceId` (never another workspace's; `elsewhere` says the id
   * names one, for the audit log). The call to billing carries `requestId`, so its log lines share
   * the request's id (docs/conventions.md#response-headers).
   */
  async find(generationId: string, workspaceId: string, requestId?: string): Promise<GenerationLookup> {
    const known = await findGeneration(this.deps.db, generationId);
    if (known) return known.workspace_id === workspaceId ? { generation: known } : { generation: undefined, elsewhere: true };
    try {
      const headers = requestId ? { 'x-request-id': requestId } : undefined;
      const generation = await this.deps.billing.getGeneration({ generationId, workspaceId }, { timeoutMs: 5000, headers });
      const row = {
        generation_id: generation.generationId,
        workspace_id: generation.workspaceId,
        tier: generation.tier,
        model: generation.routedModel || generation.model,
      };
      await rememberGeneration(this.deps.db, { ...row, occurredAt: generation.occurredAt ? timestampDate(generation.occurredAt) : new Date() });
      return { generation: row };
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.NotFound) return { generation: undefined, elsewhere: false };
      // Billing's answer for another workspace's generation.
      if (err instanceof ConnectError && err.code === Code.PermissionDenied) return { generation: undefined, elsewhere: true };
      throw err;
    }
  }

  /** A batch of `billing.usage.recorded`, in the consumer's transaction (one statement). */
  async usageRecorded(trx: Knex.Transaction, usages: UsageRecorded[]): Promise<void> {
    await rememberGenerations(
      trx,
      usages
        .filter((usage) => usage.generationId && usage.workspaceId)
        .map((usage) => ({
          generation_id: usage.generationId,
          workspace_id: usage.workspaceId,
          tier: usage.tier,
          model: usage.routedModel || usage.model,
          occurredAt: usage.occurredAt ? timestampDate(usage.occurredAt) : new Date(),
        })),
    );
  }
}
