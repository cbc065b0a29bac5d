import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, type ConnectError } from '@connectrpc/connect';
import type { FeedbackSchema, FeedbackSummarySchema } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { FeedbackRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type AuditTrail, recordForeignObjectProbe } from '@switchboard/runtime/audit';
import type { WorkspaceCaller } from '@switchboard/runtime/caller';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { parseDays } from '@switchboard/runtime/pagination';
import type { EventWriter } from '@switchboard/runtime/service';
import type { GenerationDirectory } from './generation-directory.js';
import type { Router } from './routing.js';
import { type FeedbackRow, findFeedback, insertFeedback, replaceFeedback, summarize } from './store/feedback.js';
import { lockGeneration } from './store/generations.js';
import { adjustScore } from './store/routing-scores.js';

/**
 * Feedback on generations (docs/api/conversations.md#feedback): one rating per workspace and generation, replaced by a new
 * one (200 instead of 201). The rating, its `feedback.recorded` event and the routing evidence
 * (thumbs per tier and the model that served the generation; a replaced rating takes its old
 * vote back) change in one transaction, which locks the generation so concurrent ratings of it
 * count once each.
 */

export const maxCommentLength = 2000;
export const maxTags = 10;
export const maxTagLength = 50;

const codePoints = (text: string) => Array.from(text).length;
const generationNotFound = () => apiError(Code.NotFound, 'generation_not_found', 'No such generation in this workspace.');

export function toFeedback(row: FeedbackRow): MessageInitShape<typeof FeedbackSchema> {
  return {
    feedbackId: row.id,
    generationId: row.generation_id,
    rating: row.rating,
    comment: row.comment ?? undefined,
    tags: row.tags,
    model: row.model,
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
  };
}

export interface FeedbackDeps {
  db: Knex;
  generations: GenerationDirectory;
  router: Router;
  recordEvent: EventWriter;
  /** Where a rating of another workspace's generation is recorded (access.denied). */
  audit?: AuditTrail;
}

export class FeedbackLedger {
  constructor(private readonly deps: FeedbackDeps) {}

  async record(
    caller: WorkspaceCaller,
    input: { generationId: string; rating: number; comment?: string; tags: string[] },
    /** The 400 of the input rules (docs/conventions.md#input-rules), thrown once the generation is found. */
    inputProblem?: () => ConnectError | undefined,
  ): Promise<{ feedback: MessageInitShape<typeof FeedbackSchema>; created: boolean }> {
    const { workspaceId, requestId } = caller;
    if (input.generationId.trim() === '') throw invalidArgument('generation_id', 'generation_id is required (the X-Service-Generation-Id of a response).');
    const lookup = await this.deps.generations.find(input.generationId, workspaceId, requestId);
    if (lookup.generation === undefined) {
      // The lookup already knows whether the id names another workspace's generation.
      const { audit } = this.deps;
      if (audit) void recordForeignObjectProbe(audit, caller, { type: 'generation', id: input.generationId }, async () => lookup.elsewhere);
      throw generationNotFound();
    }
    const { generation } = lookup;
    const problem = inputProblem?.();
    if (problem) throw problem;
    if (input.rating !== 1 && input.rating !== -1) throw invalidArgument('rating', 'rating must be 1 (thumbs up) or -1 (thumbs down).');
    if (input.comment !== undefined && codePoints(input.comment) > maxCommentLength) {
      throw invalidArgument('comment', `comment may be at most ${maxCommentLength} characters.`);
    }
    if (input.tags.length > maxTags) throw invalidArgument('tags', `At most ${maxTags} tags.`);
    input.tags.forEach((tag, index) => {
      const length = codePoints(tag);
      if (length < 1 || length > maxTagLength) throw invalidArgument(`tags[${index}]`, `Each tag is 1 to ${maxTagLength} characters.`);
    });
    const tags = [...new Set(input.tags)];
    const comment = input.comment ?? null;
    const result = await this.deps.db.transaction(async (trx) => {
      const locked = await lockGeneration(trx, generation.generation_id);
      if (!locked) throw generationNotFound();
      const previous = await findFeedback(trx, workspaceId, locked.generation_id);
      const row = previous
        ? await replaceFeedback(trx, previous.id, { rating: input.rating, comment, tags })
        : await insertFeedback(trx, {
            id: newId('fb'),
            workspaceId,
            generationId: locked.generation_id,
            rating: input.rating,
            comment,
            tags,
            tier: locked.tier,
            model: locked.model,
          });
      const delta = (rating: number | undefined, sign: number) => (rating === 1 ? [sign, 0] : rating === -1 ? [0, sign] : [0, 0]);
      const [upOld, downOld] = delta(previous?.rating, -1);
      const [upNew, downNew] = delta(input.rating, 1);
      if (upOld + upNew !== 0 || downOld + downNew !== 0) await adjustScore(trx, locked.tier, locked.model, upOld + upNew, downOld + downNew);
      await this.deps.recordEvent(trx, FeedbackRecordedSchema, {
        workspaceId,
        data: {
          feedbackId: row.id,
          generationId: row.generation_id,
          workspaceId,
          rating: row.rating,
          previousRating: previous?.rating,
          tags: row.tags,
          tier: locked.tier,
          model: locked.model,
        },
        requestId,
      });
      return { row, created: !previous };
    });
    this.deps.router.forgetScores();
    return { feedback: toFeedback(result.row), created: result.created };
  }

  async summary(workspaceId: string, rawDays: number | undefined): Promise<MessageInitShape<typeof FeedbackSummarySchema>> {
    const days = parseDays(rawDays);
    const since = new Date(Date.now() - days * 24 * 3600 * 1000);
    const rows = await summarize(this.deps.db, workspaceId, since);
    const counts = (row: { total: number; thumbs_up: number; thumbs_down: number }) => ({
      total: row.total,
      thumbsUp: row.thumbs_up,
      thumbsDown: row.thumbs_down,
    });
    return {
      days,
      ...counts(rows.totals),
      byTag: Object.fromEntries(rows.byTag.map((row) => [row.key, counts(row)])),
      byModel: Object.fromEntries(rows.byModel.map((row) => [row.key, counts(row)])),
    };
  }
}
