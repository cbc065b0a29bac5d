import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import type { GenerationRecordSchema, ListGenerationsResponseSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { FeedbackRecorded, FeedbackRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type AuditTrail, recordForeignObjectProbe } from '@switchboard/runtime/audit';
import type { WorkspaceCaller } from '@switchboard/runtime/caller';
import type { ReceivedEvent } from '@switchboard/runtime/consumer';
import type { Knex } from '@switchboard/runtime/db';
import { apiError } from '@switchboard/runtime/errors';
import { Money } from '@switchboard/runtime/money';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import { optionalId } from './fields.js';
import { type FeedbackRow, findGeneration, type GenerationRow, type GenerationScope, listGenerations, upsertFeedback } from './store/generations.js';
import { workspaceOfGeneration } from './store/usage.js';

/**
 * The activity log (docs/api/generations.md): the workspace's generations from the usage records
 * the data planes publish, with the facts they report beside the usage and the latest feedback,
 * projected here from `feedback.recorded` into a table of its own keyed by generation id (a
 * rating that arrives before its usage row waits there, and joins once the row is settled). A
 * user's session and an API key with `read` see the workspace's generations; a key with only
 * `inference` its own, and another key's, like another workspace's, is not found. Reads wait for the usage published before them to be
 * settled, as the balance does.
 */

/** How an answer ended (docs/api/generations.md#status). */
export const generationStatuses = ['completed', 'client_closed', 'upstream_error'] as const;

export interface GenerationsDeps {
  db: Knex;
  /** Where a lookup of another workspace's generation is recorded (access.denied). */
  audit?: AuditTrail;
  /** Resolves once the usage the data planes published before the call is settled (docs/money-path.md#usage). */
  usageSettled?: () => Promise<unknown>;
}

type GenerationView = MessageInitShape<typeof GenerationRecordSchema>;

const notFound = () => apiError(Code.NotFound, 'generation_not_found', 'No such generation in this workspace.');

/**
 * What the caller may see (docs/api/generations.md#who-sees-what): a session and an API key with
 * `read` the workspace's generations, a key with `inference` but not `read` its own only.
 */
function scopeOf(caller: WorkspaceCaller): GenerationScope {
  if (caller.principalType !== 'key' || caller.scopes?.includes('read')) return { workspaceId: caller.workspaceId };
  // A key's mesh token always names it; one that does not sees nothing rather than every key's.
  return { workspaceId: caller.workspaceId, keyId: caller.keyId ?? '' };
}

function toRecord(row: GenerationRow): GenerationView {
  return {
    generationId: row.generation_id,
    keyId: row.key_id,
    model: row.model,
    routedModel: row.routed_model ?? row.model,
    tier: row.tier,
    region: row.region ?? undefined,
    inputTokens: BigInt(row.input_tokens),
    outputTokens: BigInt(row.output_tokens),
    costUsd: new Money(row.cost_usd).toFixed(),
    upstreamCostUsd: row.upstream_cost_usd === null ? undefined : new Money(row.upstream_cost_usd).toFixed(),
    streamed: row.streamed ?? undefined,
    status: row.status ?? undefined,
    latencyMs: row.latency_ms ?? undefined,
    timeToFirstTokenMs: row.time_to_first_token_ms ?? undefined,
    overheadMs: row.overhead_ms === null ? undefined : Number(row.overhead_ms),
    conversationId: row.conversation_id ?? undefined,
    feedback: row.rating === null ? undefined : { rating: row.rating, tags: row.tags ?? [] },
    createdAt: timestampFromDate(row.occurred_at),
  };
}

export class Generations {
  constructor(private readonly deps: GenerationsDeps) {}

  async list(
    caller: WorkspaceCaller,
    input: { limit?: number; after?: string; keyId?: string },
  ): Promise<MessageInitShape<typeof ListGenerationsResponseSchema>> {
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const wanted = optionalId(input.keyId, 'key_id');
    const scope = scopeOf(caller);
    // A key limited to its own asking for another key's sees none (another key is never named).
    if (wanted !== undefined && scope.keyId !== undefined && wanted !== scope.keyId) return { data: [], hasMore: false };
    await this.deps.usageSettled?.();
    const rows = await listGenerations(this.deps.db, { ...scope, keyId: wanted ?? scope.keyId }, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return { data: page.rows.map(toRecord), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  async get(caller: WorkspaceCaller, generationId: string): Promise<GenerationView> {
    if (generationId === '' || generationId.length > 200) throw notFound();
    const scope = scopeOf(caller);
    // A generation answered a moment ago may still be on its way to settlement.
    let row = await findGeneration(this.deps.db, scope, generationId);
    if (!row && this.deps.usageSettled) {
      await this.deps.usageSettled();
      row = await findGeneration(this.deps.db, scope, generationId);
    }
    if (!row) {
      const { audit, db } = this.deps;
      if (audit) {
        void recordForeignObjectProbe(audit, caller, { type: 'generation', id: generationId }, async () => {
          const owner = await workspaceOfGeneration(db, generationId);
          return owner !== undefined && owner !== caller.workspaceId;
        });
      }
      throw notFound();
    }
    return toRecord(row);
  }

  /**
   * `feedback.recorded` events (a batch, in stream order): the latest rating of each generation is
   * stored, replacing an older one; a repeat changes nothing (the consumer runs each event once).
   */
  async feedbackRecorded(trx: Knex.Transaction, events: ReceivedEvent<typeof FeedbackRecordedSchema>[]): Promise<void> {
    const latest = new Map<string, FeedbackRow>();
    for (const event of events) {
      const rating = this.ratingOf(event.data, event.occurred_at);
      if (rating) latest.set(rating.generationId, rating);
    }
    await upsertFeedback(trx, [...latest.values()]);
  }

  /** The rating an event states; undefined (skipped) for one that names no generation or no valid rating. */
  private ratingOf(data: FeedbackRecorded, occurredAt: string): FeedbackRow | undefined {
    if ((data.rating !== 1 && data.rating !== -1) || data.generationId === '' || data.workspaceId === '') return undefined;
    return {
      generationId: data.generationId,
      workspaceId: data.workspaceId,
      feedbackId: data.feedbackId,
      rating: data.rating,
      tags: data.tags,
      ratedAt: occurredAt ? new Date(occurredAt) : new Date(),
    };
  }
}
