import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code } from '@connectrpc/connect';
import type { ExplainRouteResponseSchema, RouteModelResponseSchema } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { type ModelCatalog, policyAllows, type RoutingPolicy, routingPolicies, type ServiceTier } from '@switchboard/runtime/model-catalog';
import { defaultExploration, noAllowedCandidateMessage, pickCandidate, posterior, type Sampler } from '@switchboard/runtime/routing-sampler';
import { listScores, type ScoreRow } from './store/routing-scores.js';

/**
 * Routing that learns from feedback (docs/api/conversations.md#self-learning-routing, docs/api/internal-calls.md#routemodel). Each candidate of a tier (from the
 * model catalog) is scored by the thumbs up and down counted on the model that served each rated
 * generation, and picked by the shared sampler (runtime/src/routing-sampler.ts), which the data
 * plane's replica of these scores (ExplainRoute) picks with too. Scores are read from the
 * database at most every `scoresMaxAgeMs` (1 s), so frequent calls make no query each.
 */

export interface RouterDeps {
  db: Knex;
  catalog: ModelCatalog;
  sampler: Sampler;
  /** Share of uniform picks among the allowed candidates (default defaultExploration, 0.05). */
  exploration?: number;
  scoresMaxAgeMs?: number;
}

function parseTier(raw: string): ServiceTier {
  if (raw !== 'fast' && raw !== 'balanced') throw invalidArgument('tier', 'tier must be fast or balanced.');
  return raw;
}

function parsePolicy(raw: string): RoutingPolicy {
  const policy = raw === '' ? 'any' : raw;
  if (!(routingPolicies as readonly string[]).includes(policy))
    throw invalidArgument('routing_policy', `routing_policy must be one of ${routingPolicies.join(', ')}.`);
  return policy as RoutingPolicy;
}

export class Router {
  private scores = new Map<string, ScoreRow>();
  private loadedAt = 0;
  private everLoaded = false;
  private loading?: Promise<void>;

  constructor(private readonly deps: RouterDeps) {}

  get exploration(): number {
    return this.deps.exploration ?? defaultExploration;
  }

  /** Drops the cached scores (a rating was just recorded here). */
  forgetScores(): void {
    this.loadedAt = 0;
  }

  async route(rawTier: string, rawPolicy: string): Promise<MessageInitShape<typeof RouteModelResponseSchema>> {
    const tier = parseTier(rawTier);
    const policy = parsePolicy(rawPolicy);
    await this.fresh();
    const scored = this.deps.catalog.candidates(tier).map((model) => ({ model, region: model.region, ...this.score(tier, model.id) }));
    const chosen = pickCandidate(scored, policy, this.exploration, this.deps.sampler);
    if (!chosen) {
      throw apiError(Code.FailedPrecondition, 'routing_policy_violation', noAllowedCandidateMessage(tier, policy), {
        httpStatus: 403,
        field: 'routing_policy',
      });
    }
    return { model: chosen.model.id, region: chosen.region };
  }

  async explain(rawTier: string, rawPolicy: string): Promise<MessageInitShape<typeof ExplainRouteResponseSchema>> {
    const tier = parseTier(rawTier);
    const policy = parsePolicy(rawPolicy);
    await this.fresh();
    return {
      tier,
      routingPolicy: policy,
      exploration: this.exploration,
      candidates: this.deps.catalog.candidates(tier).map((model) => {
        const { alpha, beta, up, down } = this.score(tier, model.id);
        return {
          model: model.id,
          region: model.region,
          allowed: policyAllows(policy, model.region),
          thumbsUp: BigInt(up),
          thumbsDown: BigInt(down),
          alpha,
          beta,
          mean: alpha / (alpha + beta),
        };
      }),
    };
  }

  private score(tier: string, model: string) {
    const row = this.scores.get(`${tier}|${model}`);
    const up = Number(row?.thumbs_up ?? 0);
    const down = Number(row?.thumbs_down ?? 0);
    return { up, down, ...posterior(up, down) };
  }

  private async fresh(): Promise<void> {
    if (Date.now() - this.loadedAt < (this.deps.scoresMaxAgeMs ?? 1000)) return;
    const startedAt = Date.now();
    this.loading ??= listScores(this.deps.db)
      .then(
        (rows) => {
          this.scores = new Map(rows.map((row) => [`${row.tier}|${row.model}`, row]));
          this.loadedAt = startedAt;
          this.everLoaded = true;
        },
        (err: unknown) => {
          // A database blip: route on the scores already known (retried a second later); with none yet, fail.
          if (!this.everLoaded) throw err;
          this.loadedAt = startedAt;
        },
      )
      .finally(() => {
        this.loading = undefined;
      });
    await this.loading;
  }
}
