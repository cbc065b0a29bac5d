import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code } from '@connectrpc/connect';
import type { ExplainRouteResponseSchema, RouteModelResponseSchema } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { type CatalogModel, type ModelCatalog, policyAllows, type RoutingPolicy, routingPolicies, type ServiceTier } from '@switchboard/runtime/model-catalog';
import type { Sampler } from './sampler.js';
import { listScores, type ScoreRow } from './store/routing-scores.js';

/**
 * Routing that learns from feedback (docs/api/conversations.md#self-learning-routing, docs/api/internal-calls.md#routemodel). Each candidate of a tier (from the
 * model catalog) has a Beta posterior: alpha = 1 + thumbs up, beta = 1 + thumbs down, counted on
 * the model that served each rated generation. A call draws from every allowed candidate's
 * posterior and takes the highest draw (Thompson sampling), except that a share `exploration`
 * of calls picks uniformly among the allowed candidates, so no candidate is ever starved of new
 * evidence. The geographic policy filters first: cn-only never leaves cn, overseas-only never
 * enters it. Scores are read from the database at most every `scoresMaxAgeMs` (1 s): the data
 * plane's hot path makes no query.
 */

export interface RouterDeps {
  db: Knex;
  catalog: ModelCatalog;
  sampler: Sampler;
  /** Share of uniform picks among the allowed candidates (default 0.05). */
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

const allows = (policy: RoutingPolicy, model: CatalogModel) => policyAllows(policy, model.region);

export class Router {
  private scores = new Map<string, ScoreRow>();
  private loadedAt = 0;
  private everLoaded = false;
  private loading?: Promise<void>;

  constructor(private readonly deps: RouterDeps) {}

  get exploration(): number {
    return this.deps.exploration ?? 0.05;
  }

  /** Drops the cached scores (a rating was just recorded here). */
  forgetScores(): void {
    this.loadedAt = 0;
  }

  async route(rawTier: string, rawPolicy: string): Promise<MessageInitShape<typeof RouteModelResponseSchema>> {
    const { tier, policy, allowed } = this.candidates(rawTier, rawPolicy);
    if (allowed.length === 0) {
      throw apiError(Code.FailedPrecondition, 'routing_policy_violation', `No model of the ${tier} tier is allowed by the ${policy} routing policy.`, {
        httpStatus: 403,
        field: 'routing_policy',
      });
    }
    await this.fresh();
    const { sampler } = this.deps;
    let chosen: CatalogModel;
    if (allowed.length === 1) chosen = allowed[0];
    else if (sampler.next() < this.exploration) chosen = allowed[Math.floor(sampler.next() * allowed.length)];
    else {
      let best = -1;
      chosen = allowed[0];
      for (const model of allowed) {
        const { alpha, beta } = this.posterior(tier, model.id);
        const draw = sampler.beta(alpha, beta);
        if (draw > best) {
          best = draw;
          chosen = model;
        }
      }
    }
    return { model: chosen.id, region: chosen.region };
  }

  async explain(rawTier: string, rawPolicy: string): Promise<MessageInitShape<typeof ExplainRouteResponseSchema>> {
    const { tier, policy } = this.candidates(rawTier, rawPolicy);
    await this.fresh();
    return {
      tier,
      routingPolicy: policy,
      exploration: this.exploration,
      candidates: this.deps.catalog.candidates(tier).map((model) => {
        const { alpha, beta, up, down } = this.posterior(tier, model.id);
        return {
          model: model.id,
          region: model.region,
          allowed: allows(policy, model),
          thumbsUp: BigInt(up),
          thumbsDown: BigInt(down),
          alpha,
          beta,
          mean: alpha / (alpha + beta),
        };
      }),
    };
  }

  private candidates(rawTier: string, rawPolicy: string) {
    const tier = parseTier(rawTier);
    const policy = parsePolicy(rawPolicy);
    return { tier, policy, allowed: this.deps.catalog.candidates(tier).filter((model) => allows(policy, model)) };
  }

  private posterior(tier: string, model: string) {
    const row = this.scores.get(`${tier}|${model}`);
    const up = Number(row?.thumbs_up ?? 0);
    const down = Number(row?.thumbs_down ?? 0);
    return { up, down, alpha: 1 + up, beta: 1 + down };
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
