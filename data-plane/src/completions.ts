import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { UsageRecordSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { ExchangeRecordSchema } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { ApiError } from '@switchboard/runtime/api-error';
import { catalogued, errorCatalogue, keyRefusalError } from '@switchboard/runtime/error-catalogue';
import { newId } from '@switchboard/runtime/ids';
import { errorMessage, type Logger } from '@switchboard/runtime/log';
import {
  type CatalogModel,
  type CatalogRegion,
  type ModelCatalog,
  policyAllows,
  type Region,
  type RoutingPolicy,
  type ServiceTier,
} from '@switchboard/runtime/model-catalog';
import { formatMoney, Money } from '@switchboard/runtime/money';
import type { Pricing } from '@switchboard/runtime/pricing';
import type { BudgetLeases, Reservation } from './budget-leases.js';
import { type ChatRequest, lastUserMessage, promptTokenBound } from './chat-request.js';
import type { ConversationDirectory } from './conversation-directory.js';
import { hasKeyBudget, type KeyReplica, type ReplicatedKey } from './key-replica.js';
import type { BalanceFacts, CapFacts } from './lease-owners.js';
import { modelList } from './model-list.js';
import { streamErrorEvent } from './openai-error.js';
import { type Prices, upstreamCost } from './prices.js';
import type { RateHold, RateLimiter } from './rate-limits.js';
import type { RoutingReplica } from './routing-replica.js';
import { callUpstream, readEvents, UpstreamRejected, UpstreamUnavailable } from './upstream.js';
import type { WorkPublisher } from './work-publisher.js';

/**
 * One chat completion through the platform (docs/api/front-door.md#a-request-step-by-step,
 * docs/money-path.md): the key is looked up in the key replica (its standing, expiry, scopes and
 * allowed models decided there), the key's rate limits admit it from their leases, the request's
 * upper-bound estimate is reserved against the key's budget lease, the workspace's budget lease
 * and its balance lease, a service tier is routed on the replicated feedback scores within the
 * key's policy and allowed models, the upstream is
 * called (once more on another candidate of the tier if it fails before its first byte), the
 * usage is priced here and published to JetStream before the answer's last byte, and the
 * exchange follows it when a conversation was named. Steady state: no call and no SQL.
 * Nothing goes upstream for a refused key, an unaffordable request, a conversation the key's
 * workspace cannot see, or a model it may not use.
 */

export interface CompletionsDeps {
  log: Logger;
  catalog: ModelCatalog;
  prices: Prices;
  pricing: Pricing;
  keys: KeyReplica;
  /** The key's budgets (every period it has a limit for), by key id. */
  caps: BudgetLeases<CapFacts>;
  /** The workspace's budgets, by workspace id. */
  workspaces: BudgetLeases<CapFacts>;
  rates: RateLimiter;
  balances: BudgetLeases<BalanceFacts>;
  routing: RoutingReplica;
  conversations: ConversationDirectory;
  publisher: WorkPublisher;
  subjects: { usage: string; exchanges: string };
  settings: {
    headersTimeoutMs: number;
    idleTimeoutMs: number;
    /** STREAM_MAX_DURATION: a stream is cut (and billed for what it produced) after this long. */
    streamMaxDurationMs: number;
    /** The output assumed for the estimate when the request sets no max_tokens. */
    defaultMaxTokens: number;
    /** The upstreams' API keys by variable name (the catalog's `api_key_env`). */
    upstreamApiKeys: Record<string, string | undefined>;
    /** The regions the demo upstream answers (DEMO_UPSTREAM without the region's key). */
    demoRegions: ReadonlySet<Region>;
  };
}

/** Where the answer goes: a JSON body, or a stream of server-sent events. */
export interface Reply {
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  json(status: number, headers: Record<string, string>, body: unknown): void;
  startStream(headers: Record<string, string>): void;
  /** Resolves once the client can take more (backpressure), or at once when it went away. */
  write(text: string): Promise<void>;
  end(): void;
  /** Headers every answer to this request carries from now on, an error's included (x-ratelimit-*). */
  headers(headers: Record<string, string>): void;
  /** Runs `work` (the upstream's call, or the read of its answer) and leaves its time out of X-Service-Overhead-Ms. */
  upstream<T>(work: () => Promise<T>): Promise<T>;
  /**
   * Milliseconds since the request arrived, and the answer's X-Service-Overhead-Ms once its headers
   * are written, else the overhead so far (of the same instant).
   */
  timing(): { elapsedMs: number; overheadMs: number };
}

/** How an answer ended, as its usage record says (docs/api/generations.md#status). */
type Ending = { status: 'completed' | 'client_closed' | 'upstream_error'; firstTokenMs?: number };

interface Target {
  model: CatalogModel;
  region: CatalogRegion;
}

interface Tokens {
  input: number;
  output: number;
}

const serviceTierOf = (model: string): ServiceTier | undefined => (model === 'service/fast' ? 'fast' : model === 'service/balanced' ? 'balanced' : undefined);

/** Which of a tier's candidates a key may be routed to; undefined: all of them. */
type Candidates = ((model: CatalogModel) => boolean) | undefined;

export class Completions {
  /** Requests in progress, for a shutdown that loses no usage. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Aborted at shutdown: streams stop and are billed for what was produced. */
  private readonly stopping = new AbortController();

  constructor(private readonly deps: CompletionsDeps) {}

  /** SIGTERM: ends the streams (billing what they produced) and waits for every request. */
  async drain(): Promise<void> {
    this.stopping.abort();
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    work.then(
      () => this.inFlight.delete(work),
      () => this.inFlight.delete(work),
    );
    return work;
  }

  /**
   * A completion for `key` (authorized by `authorize`). The order of the checks is
   * docs/api/front-door.md#order-of-checks: the key and its scope came first; here the model (400),
   * the allow-list (403), the rate limits (429), the budgets (402: key, workspace, balance), then
   * the conversation (404); nothing goes upstream before all of them passed.
   */
  complete(key: ReplicatedKey, request: ChatRequest, conversationId: string | undefined, reply: Reply): Promise<void> {
    return this.track(this.run(key, request, conversationId, reply));
  }

  private async run(key: ReplicatedKey, request: ChatRequest, conversationId: string | undefined, reply: Reply): Promise<void> {
    const { catalog, pricing } = this.deps;
    const tier = serviceTierOf(request.model);
    const passthrough = tier ? undefined : catalog.models.filter((model) => model.id === request.model);
    if (passthrough && passthrough.length === 0) {
      throw catalogued(errorCatalogue.modelUnavailable, { model: request.model }, { field: 'model' }, 'front-door');
    }
    const candidates = this.allowedCandidates(key, tier, request.model);
    const bound: Tokens = { input: promptTokenBound(request), output: (request.maxTokens ?? this.deps.settings.defaultMaxTokens) * request.choices };
    const estimate = new Money(await this.deps.prices.estimate(tier ? { tier } : { models: passthrough! }, bound));
    // The estimate's output bound holds upstream too: without a limit an answer could outgrow it.
    if (request.maxTokens === undefined) request.body.max_tokens = this.deps.settings.defaultMaxTokens;

    const places = this.deps.publisher.hold(conversationId === undefined ? 1 : 2);
    if (!places) throw catalogued(errorCatalogue.serviceUnavailable, { dependency: 'usage queue' }, {}, 'front-door');
    let rate: RateHold | undefined;
    let cap: Reservation<CapFacts> | undefined;
    let workspace: Reservation<CapFacts> | undefined;
    let balance: Reservation<BalanceFacts> | undefined;
    let billed = false;
    try {
      rate = await this.deps.rates.admit(key, bound.input + bound.output, (headers) => reply.headers(headers));
      cap = hasKeyBudget(key) ? await this.reserveBudget(this.deps.caps, key.keyId, estimate) : undefined;
      workspace = await this.reserveBudget(this.deps.workspaces, key.workspaceId, estimate);
      balance = await this.reserveBalance(key, estimate);
      if (conversationId !== undefined) await this.deps.conversations.check(key.workspaceId, conversationId);
      const first = this.firstTarget(tier, passthrough, key, candidates, request.model);
      const generationId = newId('gen');
      // A non-streamed answer is produced (and billed) even if the client leaves; a stream stops with the client.
      const signal = request.stream
        ? AbortSignal.any([reply.signal, this.stopping.signal, AbortSignal.timeout(this.deps.settings.streamMaxDurationMs)])
        : this.stopping.signal;
      const { response, target } = await reply.upstream(() => this.callWithFailover(first, tier, key.routingPolicy, candidates, request, signal));
      const planId = balance.facts.planId;
      const bill = async (tokens: Tokens, answer: string | undefined, ending: Ending) => {
        const timing = reply.timing();
        const latencyMs = Math.round(timing.elapsedMs);
        const upstreamCostUsd = upstreamCost(target.model, tokens);
        const billedTier = pricing.tierOf(request.model, false);
        const cost = pricing.cost({ tier: billedTier, inputTokens: BigInt(tokens.input), outputTokens: BigInt(tokens.output), upstreamCostUsd }, planId);
        const costUsd = formatMoney(cost);
        const occurredAt = timestampFromDate(new Date());
        const record = create(UsageRecordSchema, {
          generationId,
          keyId: key.keyId,
          workspaceId: key.workspaceId,
          model: request.model,
          routedModel: tier ? target.model.id : undefined,
          inputTokens: BigInt(tokens.input),
          outputTokens: BigInt(tokens.output),
          upstreamCostUsd,
          occurredAt,
          costUsd,
          tier: billedTier,
          planId,
          pricingVersion: pricing.version,
          capLeaseId: cap?.leaseId || undefined,
          workspaceLeaseId: workspace?.leaseId || undefined,
          balanceLeaseId: balance?.leaseId || undefined,
          region: target.model.region,
          streamed: request.stream,
          status: ending.status,
          latencyMs,
          timeToFirstTokenMs: ending.firstTokenMs === undefined ? latencyMs : Math.round(ending.firstTokenMs),
          overheadMs: timing.overheadMs,
          conversationId,
        });
        await this.deps.publisher.publish(this.deps.subjects.usage, toBinary(UsageRecordSchema, record), generationId);
        cap?.settle(cost);
        workspace?.settle(cost);
        balance?.settle(cost);
        rate?.settleTokens(tokens.input + tokens.output);
        billed = true;
        if (conversationId !== undefined && answer !== undefined) await this.storeExchange(generationId, key.workspaceId, conversationId, request, answer);
        return {
          generation_id: generationId,
          tier: billedTier,
          routed_model: target.model.id,
          region: target.model.region,
          cost_usd: costUsd,
        };
      };
      await this.answer(request, reply, signal, response, target, generationId, bound, bill);
    } finally {
      // Nothing was billed (refused, the upstream failed, its answer unreadable): the reservations end at no cost.
      if (!billed) {
        cap?.settle(new Money(0));
        workspace?.settle(new Money(0));
        balance?.settle(new Money(0));
      }
      rate?.end();
      places.release();
    }
  }

  /** The upstream's answer to the client, billed before its last byte leaves. */
  private async answer(
    request: ChatRequest,
    reply: Reply,
    /** Ends a stream: the client gone, STREAM_MAX_DURATION, a shutdown. */
    signal: AbortSignal,
    response: Response,
    target: Target,
    generationId: string,
    bound: Tokens,
    bill: (tokens: Tokens, answer: string | undefined, ending: Ending) => Promise<Record<string, unknown>>,
  ): Promise<void> {
    const headers = { 'x-service-generation-id': generationId };
    if (!request.stream) {
      let body: {
        usage?: { prompt_tokens?: number; completion_tokens?: number };
        choices?: Array<{ message?: { content?: unknown } }>;
      };
      try {
        body = (await reply.upstream(() => response.json())) as typeof body;
      } catch (err) {
        // Unreadable: nothing the client can use was produced, and nothing is billed.
        throw upstreamError(new UpstreamUnavailable(`the upstream's answer could not be read (${(err as Error).message})`));
      }
      // Without the upstream's count the answer is billed at the estimate's bounds.
      const usage = body.usage ? { input: count(body.usage.prompt_tokens), output: count(body.usage.completion_tokens) } : bound;
      const answer = typeof body.choices?.[0]?.message?.content === 'string' ? body.choices[0].message.content : '';
      // Not streamed: the first token reaches the client with the whole answer (its time is the latency).
      const service = await bill(usage, answer, { status: reply.signal.aborted ? 'client_closed' : 'completed' });
      reply.json(200, headers, { ...body, service });
      return;
    }

    reply.startStream(headers);
    let usage: Tokens | undefined;
    let answer = '';
    let deltas = 0;
    let completed = false;
    let last: { id?: string; created?: number; model?: string } = {};
    let failure: unknown;
    /** When the first chunk, and the first with content, went to the client. */
    let firstChunkMs: number | undefined;
    let firstContentMs: number | undefined;
    try {
      for await (const event of readEvents(response.body!, this.deps.settings.idleTimeoutMs, signal)) {
        if (event.data === '[DONE]') break;
        await reply.write(event.raw);
        firstChunkMs ??= reply.timing().elapsedMs;
        try {
          const chunk = JSON.parse(event.data) as {
            id?: string;
            created?: number;
            model?: string;
            usage?: { prompt_tokens?: number; completion_tokens?: number };
            choices?: Array<{ delta?: { content?: unknown } }>;
          };
          last = { id: chunk.id ?? last.id, created: chunk.created ?? last.created, model: chunk.model ?? last.model };
          if (chunk.usage) usage = { input: count(chunk.usage.prompt_tokens), output: count(chunk.usage.completion_tokens) };
          const content = chunk.choices?.[0]?.delta?.content;
          if (typeof content === 'string' && content !== '') {
            firstContentMs ??= reply.timing().elapsedMs;
            answer += content;
            deltas += 1;
          }
        } catch {
          // Not JSON (a comment, a keep-alive): passed on, nothing to learn from it.
        }
      }
      // Its `[DONE]`, or a clean close without it: readEvents throws for a client gone, a stream
      // cut here and an upstream that failed, so what reaches this line is a complete stream.
      completed = true;
    } catch (err) {
      failure = err;
    }
    // What is billed: the upstream's usage when it came; a complete stream without it (ended by
    // `[DONE]` or closed cleanly), at the estimate's bounds (docs/money-path.md#what-is-billed); a
    // stream cut short (the client left, it ran too long, the upstream failed), the prompt at the
    // usual 4 bytes a token and a token per delta.
    const billed = usage ?? (completed ? bound : { input: Math.ceil(request.bodyBytes / 4), output: deltas });
    const cut = signal.aborted || failure !== undefined;
    const service = await bill(billed, cut ? undefined : answer, {
      status: reply.signal.aborted ? 'client_closed' : cut ? 'upstream_error' : 'completed',
      firstTokenMs: firstContentMs ?? firstChunkMs,
    });
    if (reply.signal.aborted) {
      this.deps.log.info({ generation_id: generationId, output_tokens: billed.output }, 'the client went away mid-stream; billed what was produced');
      return;
    }
    if (failure) {
      // Cut here (STREAM_MAX_DURATION, a shutdown), or ended early by the upstream: the client is told which.
      const error = this.stopping.signal.aborted
        ? catalogued(errorCatalogue.serviceUnavailable, { because: 'shutdown' }, {}, 'front-door')
        : signal.aborted
          ? catalogued(errorCatalogue.streamTooLong, {}, 'front-door')
          : catalogued(errorCatalogue.upstreamError, { streamEndedEarly: true }, {}, 'front-door');
      this.deps.log.warn({ err: (failure as Error).message, generation_id: generationId, code: error.code }, 'a stream ended before its end');
      await reply.write(`data: ${JSON.stringify(streamErrorEvent(error))}\n\n`);
      reply.end();
      return;
    }
    const final = {
      id: last.id ?? generationId,
      object: 'chat.completion.chunk',
      created: last.created ?? Math.floor(Date.now() / 1000),
      model: last.model ?? target.model.id,
      choices: [],
      service,
    };
    await reply.write(`data: ${JSON.stringify(final)}\n\ndata: [DONE]\n\n`);
    reply.end();
  }

  /**
   * The model list for a key (docs/api/front-door.md#the-model-list), priced for its workspace's
   * plan, which the balance lease carries. Without billing the prices are the default plan's,
   * rather than no list at all.
   */
  async models(key: ReplicatedKey): Promise<ReturnType<typeof modelList>> {
    const { pricing, balances, catalog, log, settings } = this.deps;
    const planId = await balances.facts(key.workspaceId).then(
      (facts) => facts.planId || pricing.defaultPlan,
      (err: unknown) => {
        log.warn({ err: errorMessage(err), workspace_id: key.workspaceId }, "the workspace's plan is unknown; models are priced at the default plan's");
        return pricing.defaultPlan;
      },
    );
    return modelList(catalog, pricing, planId, settings.demoRegions, key.allows);
  }

  /**
   * The key as the replica holds it, checked as every front-door route checks it first: a refused
   * key is its 401 of the catalogue (docs/api/keys.md; expiry by this replica's clock, so no event
   * is needed for it), then a key without the `inference` scope is a 403. From here on every
   * answer carries the key's x-ratelimit-* headers (`headers` gets them).
   */
  async authorize(fullKey: string, headers: (headers: Record<string, string>) => void): Promise<ReplicatedKey> {
    if (!this.deps.keys.fresh) throw catalogued(errorCatalogue.serviceUnavailable, { dependency: 'keys service' }, {}, 'front-door');
    const key = await this.deps.keys.lookup(fullKey);
    if (!key) throw keyRefusalError({ reason: 'unknown' }, 'front-door')!;
    if (key.status === 'revoked') throw keyRefusalError({ reason: 'revoked' }, 'front-door')!;
    if (key.expiresAt !== null && Date.now() >= key.expiresAt) throw keyRefusalError({ reason: 'expired' }, 'front-door')!;
    // Only a key with a requests or tokens limit has x-ratelimit-* headers: nothing to build for the others.
    if (key.rateLimits.requests !== undefined || key.rateLimits.tokens !== undefined) headers(this.deps.rates.headers(key));
    // A key state without scopes is refused rather than trusted (fail closed), as the gateway does.
    if (!key.scopes.has('inference')) throw catalogued(errorCatalogue.insufficientScope, { metadata: { required_scope: 'inference' } }, 'front-door');
    return key;
  }

  /**
   * The candidates of `tier` the key may be routed to (docs/api/front-door.md#allowed-models): all
   * of them when a pattern matches the tier's own id (`service/fast`, `service/*`, `*`), else those
   * whose id a pattern matches; a 403 model_not_allowed when the key may use none, or may not use
   * the concrete model asked for.
   */
  private allowedCandidates(key: ReplicatedKey, tier: ServiceTier | undefined, model: string): Candidates {
    if (key.allows(model)) return undefined;
    if (tier) {
      const allowed = (candidate: CatalogModel) => key.allows(candidate.id);
      if (this.deps.catalog.candidates(tier).some(allowed)) return allowed;
    }
    throw catalogued(errorCatalogue.modelNotAllowed, { field: 'model' }, 'front-door');
  }

  /** The estimate held against a budget lease (the key's, the workspace's); an unlimited budget holds nothing. */
  private async reserveBudget(leases: BudgetLeases<CapFacts>, subject: string, estimate: Money): Promise<Reservation<CapFacts>> {
    const reserved = await leases.reserve(subject, estimate).catch(ownerUnavailable);
    if (reserved.ok) return reserved;
    if (reserved.refusal) throw keyRefusalError({ reason: reserved.refusal }, 'front-door')!;
    throw keyRefusalError({ reason: 'spend_cap_exceeded', ...reserved.facts }, 'front-door')!;
  }

  /** The estimate held against the workspace's balance lease: a request must be affordable at its estimate. */
  private async reserveBalance(key: ReplicatedKey, estimate: Money): Promise<Reservation<BalanceFacts>> {
    const reserved = await this.deps.balances.reserve(key.workspaceId, estimate).catch(ownerUnavailable);
    if (reserved.ok) return reserved;
    throw catalogued(
      errorCatalogue.insufficientBalance,
      {
        metadata: { balance_usd: formatMoney(reserved.facts.balanceUsd || '0'), required_usd: formatMoney(estimate) },
      },
      'front-door',
    );
  }

  /** The model to call first: the routing replica's pick for a service tier, else the catalog model the key's policy allows. */
  private firstTarget(
    tier: ServiceTier | undefined,
    passthrough: CatalogModel[] | undefined,
    key: ReplicatedKey,
    candidates: Candidates,
    requested: string,
  ): Target {
    const policy = key.routingPolicy;
    if (tier) return this.deps.routing.pick(tier, policy, candidates);
    const allowed = passthrough?.find((model) => policyAllows(policy, model.region));
    if (!allowed) {
      throw catalogued(errorCatalogue.routingPolicyViolation, { model: requested, policy }, { field: 'model' }, 'front-door');
    }
    return this.target(allowed);
  }

  private target(model: CatalogModel | undefined): Target {
    const region = model && this.deps.catalog.regions.get(model.region);
    if (!model || !region) throw catalogued(errorCatalogue.serviceUnavailable, { because: 'routedModelMissing' }, {}, 'front-door');
    return { model, region };
  }

  /** The first target, then (a service tier only) once another candidate the policy allows. */
  private async callWithFailover(
    first: Target,
    tier: ServiceTier | undefined,
    policy: RoutingPolicy,
    candidates: Candidates,
    request: ChatRequest,
    signal: AbortSignal,
  ) {
    const { headersTimeoutMs, upstreamApiKeys: apiKeys, demoRegions } = this.deps.settings;
    const settings = { headersTimeoutMs, apiKeys, demoRegions, signal };
    try {
      return { response: await callUpstream(first, request.body, settings), target: first };
    } catch (err) {
      if (err instanceof UpstreamRejected) throw upstreamRejected(err);
      if (!(err instanceof UpstreamUnavailable)) throw err;
      const second = tier
        ? this.deps.catalog
            .candidates(tier)
            .find(
              (model) =>
                model !== first.model && policyAllows(policy, model.region) && (candidates?.(model) ?? true) && this.deps.catalog.regions.has(model.region),
            )
        : undefined;
      this.deps.log.warn({ model: first.model.id, err: err.message, failover: second?.id ?? null }, 'upstream failed before its first byte');
      if (!second) throw upstreamError(err);
      const target = this.target(second);
      try {
        return { response: await callUpstream(target, request.body, settings), target };
      } catch (again) {
        if (again instanceof UpstreamRejected) throw upstreamRejected(again);
        if (again instanceof UpstreamUnavailable) throw upstreamError(again);
        throw again;
      }
    }
  }

  /** The request's last user message and the answer, published for the conversation asked for (appended once, after the answer). */
  private async storeExchange(generationId: string, workspaceId: string, conversationId: string, request: ChatRequest, answer: string): Promise<void> {
    // NUL, which Postgres text cannot hold, is replaced where the exchange is stored (conversations' exchange-appends.ts).
    const messages = [];
    const question = lastUserMessage(request);
    if (question) messages.push({ role: 'user', content: question });
    if (answer) messages.push({ role: 'assistant', content: answer });
    if (messages.length === 0) return;
    const record = create(ExchangeRecordSchema, { generationId, workspaceId, conversationId, messages, occurredAt: timestampFromDate(new Date()) });
    // Its own message id: the usage record of the generation is in the same stream under the generation id.
    await this.deps.publisher.publish(this.deps.subjects.exchanges, toBinary(ExchangeRecordSchema, record), `${generationId}.exchange`);
  }
}

function count(value: number | undefined): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : 0;
}

function upstreamError(err: UpstreamUnavailable): ApiError {
  return catalogued(errorCatalogue.upstreamError, { failure: err.message }, {}, 'front-door');
}

function upstreamRejected(err: UpstreamRejected): ApiError {
  return catalogued(errorCatalogue.upstreamRejected, { reason: err.message }, {}, 'front-door');
}

/** A lease owner that cannot answer while this replica has no room left: 503, the request is not made. */
function ownerUnavailable(err: unknown): never {
  if (err instanceof ApiError) throw err;
  throw catalogued(errorCatalogue.serviceUnavailable, {}, {}, 'front-door');
}
