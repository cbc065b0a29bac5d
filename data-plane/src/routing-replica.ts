import type { Client } from '@connectrpc/connect';
import type { ExplainRouteResponse, RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { errorMessage, type Logger } from '@switchboard/runtime/log';
import {
  type CatalogModel,
  type CatalogRegion,
  type ModelCatalog,
  type Region,
  type RoutingPolicy,
  type ServiceTier,
  serviceTiers,
} from '@switchboard/runtime/model-catalog';
import { startPeriodic } from '@switchboard/runtime/periodic';
import { defaultExploration, pickCandidate, posterior, Sampler } from '@switchboard/runtime/routing-sampler';
import type { BackgroundTask } from '@switchboard/runtime/service';

/**
 * The routing scores of every service tier, in memory (docs/money-path.md): a request's model is
 * picked here with the shared sampler, the way RouteModel picks, without a call. The scores are
 * read in the background from the conversations service (ExplainRoute, policy any) every
 * ROUTING_REFRESH; while it cannot be read, the last snapshot keeps serving. Before the first
 * snapshot every candidate has the prior (a uniform pick), which only costs the learning of a
 * moment. The candidates are this data plane's catalog's (the models it can call): scores of a
 * model it does not know are ignored, and a model the scores do not name has the prior.
 */

export interface RoutingReplicaDeps {
  log: Logger;
  catalog: ModelCatalog;
  routing: Client<typeof RoutingService>;
  /** ROUTING_REFRESH: how often the scores are read again. */
  refreshMs: number;
  /** The deadline of each ExplainRoute (default 5 s); one that misses it leaves the snapshot serving. */
  timeoutMs?: number;
  /** The pick's randomness (a test fixes its seed). */
  sampler?: Sampler;
}

/** A model to call and the upstream of its region. */
export interface RoutingTarget {
  model: CatalogModel;
  region: CatalogRegion;
}

interface ScoredTarget {
  target: RoutingTarget;
  region: Region;
  alpha: number;
  beta: number;
}

interface TierScores {
  exploration: number;
  candidates: ScoredTarget[];
}

export class RoutingReplica {
  private readonly tiers = new Map<ServiceTier, TierScores>();
  private readonly sampler: Sampler;
  private task?: BackgroundTask;
  /** When a refresh last failed, until one succeeds again (one log line per outage, not one per period). */
  private failingSince?: number;
  /** When every tier's scores were last read (epoch ms); undefined before the first snapshot. */
  refreshedAt?: number;

  constructor(private readonly deps: RoutingReplicaDeps) {
    this.sampler = deps.sampler ?? new Sampler();
    for (const tier of serviceTiers) this.tiers.set(tier, this.scored(tier));
  }

  /** Reads the scores at once, then every refreshMs, until stop. */
  start(): void {
    this.task ??= startPeriodic({ name: 'routing refresh', everyMs: this.deps.refreshMs, firstRunAfterMs: 0, log: this.deps.log, run: () => this.tick() });
  }

  async stop(): Promise<void> {
    await this.task?.stop();
    this.task = undefined;
  }

  /**
   * The model a request for `tier` under `policy` is sent to, among the candidates `allowed`
   * keeps (a key's allowed models; all without it); a 403 routing_policy_violation (as
   * RouteModel's refusal was answered) when the policy allows none of them.
   */
  pick(tier: ServiceTier, policy: RoutingPolicy, allowed?: (model: CatalogModel) => boolean): RoutingTarget {
    const scores = this.tiers.get(tier)!;
    const candidates = allowed ? scores.candidates.filter((candidate) => allowed(candidate.target.model)) : scores.candidates;
    const chosen = pickCandidate(candidates, policy, scores.exploration, this.sampler);
    if (!chosen) throw catalogued(errorCatalogue.routingPolicyViolation, { tier, policy }, { field: 'model' }, 'front-door');
    return chosen.target;
  }

  /** Reads every tier's scores now; a tier that cannot be read keeps its snapshot (and the call rejects). */
  async refresh(): Promise<void> {
    const answers = await Promise.allSettled(
      serviceTiers.map(async (tier) => {
        const answer = await this.deps.routing.explainRoute({ tier, routingPolicy: 'any' }, { timeoutMs: this.deps.timeoutMs ?? 5000 });
        this.tiers.set(tier, this.scored(tier, answer));
      }),
    );
    const failed = answers.find((answer) => answer.status === 'rejected');
    if (failed) throw failed.reason;
    this.refreshedAt = Date.now();
  }

  private async tick(): Promise<void> {
    try {
      await this.refresh();
      if (this.failingSince !== undefined) this.deps.log.info({ failed_for_ms: Date.now() - this.failingSince }, 'routing scores refreshed again');
      this.failingSince = undefined;
    } catch (err) {
      if (this.failingSince !== undefined) return;
      this.failingSince = Date.now();
      this.deps.log.warn(
        { err: errorMessage(err), snapshot_age_ms: this.refreshedAt === undefined ? null : Date.now() - this.refreshedAt },
        'routing scores could not be refreshed; picking from the last snapshot',
      );
    }
  }

  /** The catalog's candidates of `tier` with the scores of `answer` (the prior where it names none). */
  private scored(tier: ServiceTier, answer?: ExplainRouteResponse): TierScores {
    const known = new Map(answer?.candidates.map((candidate) => [`${candidate.region}|${candidate.model}`, candidate]));
    const { catalog } = this.deps;
    return {
      exploration: answer?.exploration ?? defaultExploration,
      candidates: catalog.candidates(tier).map((model) => {
        const score = known.get(`${model.region}|${model.id}`);
        return {
          // The catalog refuses a model whose region it does not define.
          target: { model, region: catalog.regions.get(model.region)! },
          region: model.region,
          ...(score ? { alpha: score.alpha, beta: score.beta } : posterior(0, 0)),
        };
      }),
    };
  }
}
