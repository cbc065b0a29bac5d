import type { MessageInitShape } from '@bufbuild/protobuf';
import { type Client, Code, ConnectError } from '@connectrpc/connect';
import type { RecordUsageRequestSchema, UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { ExchangeService, RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import type { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { ApiError } from '@switchboard/runtime/api-error';
import { keyRefusalError } from '@switchboard/runtime/error-catalogue';
import { newId } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import {
  type CatalogModel,
  type CatalogRegion,
  type ModelCatalog,
  policyAllows,
  type RoutingPolicy,
  type ServiceTier,
} from '@switchboard/runtime/model-catalog';
import { type ChatRequest, lastUserMessage, promptTokenBound } from './chat-request.js';
import { type Prices, upstreamCost } from './prices.js';
import { callUpstream, readEvents, UpstreamRejected, UpstreamUnavailable } from './upstream.js';

/**
 * One chat completion through the platform (docs/api/front-door.md#a-request-step-by-step): the key is authorized with an estimate
 * reserved against its cap, a service tier is routed by feedback within the key's policy, the
 * upstream is called (once more on another candidate of the tier if it fails before its first
 * byte), the usage is recorded with the reservation, and the exchange is stored in a
 * conversation on request. Nothing goes upstream for a refused key, a conversation the key's
 * workspace cannot see, or a model it may not use.
 */

export interface CompletionsDeps {
  log: Logger;
  catalog: ModelCatalog;
  prices: Prices;
  keys: Client<typeof KeyService>;
  routing: Client<typeof RoutingService>;
  usage: Client<typeof UsageService>;
  exchanges: Client<typeof ExchangeService>;
  settings: {
    headersTimeoutMs: number;
    idleTimeoutMs: number;
    /** The output assumed for the estimate when the request sets no max_tokens. */
    defaultMaxTokens: number;
    /** The upstreams' API keys by variable name (the catalog's `api_key_env`). */
    upstreamApiKeys: Record<string, string | undefined>;
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
}

interface Target {
  model: CatalogModel;
  region: CatalogRegion;
}

interface Authorized {
  keyId: string;
  workspaceId: string;
  policy: RoutingPolicy;
  reservationId?: string;
}

const serviceTierOf = (model: string): ServiceTier | undefined => (model === 'service/fast' ? 'fast' : model === 'service/balanced' ? 'balanced' : undefined);
const internalTimeoutMs = 5000;

/** When billing cannot take a usage record, it is tried again after these delays (idempotent by generation id). */
const recordRetryDelaysMs = [1000, 2000, 5000, 10_000, 30_000];

export class Completions {
  /** Requests and usage records in progress, for a shutdown that loses no usage. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Aborted at shutdown: streams stop and are billed for what was produced. */
  private readonly stopping = new AbortController();

  constructor(private readonly deps: CompletionsDeps) {}

  /** SIGTERM: ends the streams (billing what they produced) and waits for every usage record. */
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

  complete(fullKey: string, request: ChatRequest, conversationId: string | undefined, reply: Reply): Promise<void> {
    return this.track(this.run(fullKey, request, conversationId, reply));
  }

  private async run(fullKey: string, request: ChatRequest, conversationId: string | undefined, reply: Reply): Promise<void> {
    const { catalog } = this.deps;
    const tier = serviceTierOf(request.model);
    const passthrough = tier ? undefined : catalog.models.filter((model) => model.id === request.model);
    if (passthrough && passthrough.length === 0) {
      await this.authorize(fullKey); // credentials before input (docs/conventions.md#order-of-checks)
      throw new ApiError(
        400,
        'model_unavailable',
        `The model ${JSON.stringify(request.model.slice(0, 100))} is not served here; GET /v1/models lists the models.`,
        {
          field: 'model',
        },
      );
    }
    const tokens = { input: promptTokenBound(request), output: (request.maxTokens ?? this.deps.settings.defaultMaxTokens) * request.choices };
    const estimate = await this.deps.prices.estimate(tier ? { tier } : { models: passthrough! }, tokens);
    // The estimate's output bound holds upstream too: without a limit an answer could outgrow it.
    if (request.maxTokens === undefined) request.body.max_tokens = this.deps.settings.defaultMaxTokens;
    const key = await this.authorize(fullKey, estimate);
    const generationId = newId('gen');
    let response: Response;
    let target: Target;
    try {
      if (conversationId !== undefined) await this.append(key.workspaceId, conversationId, []);
      const first = await this.firstTarget(tier, passthrough, key.policy, request.model);
      // A non-streamed answer is produced (and billed) even if the client leaves; a stream stops with the client.
      const signal = request.stream ? AbortSignal.any([reply.signal, this.stopping.signal]) : this.stopping.signal;
      ({ response, target } = await this.callWithFailover(first, tier, key.policy, request, signal));
    } catch (err) {
      // Nothing was produced: the reservation stops holding cap room now, not after its TTL.
      await this.release(key.reservationId);
      throw err;
    }
    const headers = { 'x-service-generation-id': generationId };
    const record = (usage: { input: number; output: number }) =>
      this.recordUsage({
        generationId,
        keyId: key.keyId,
        workspaceId: key.workspaceId,
        model: request.model,
        routedModel: tier ? target.model.id : undefined,
        inputTokens: BigInt(usage.input),
        outputTokens: BigInt(usage.output),
        upstreamCostUsd: upstreamCost(target.model, usage),
        reservationId: key.reservationId,
      });
    // cost_usd is null when billing could not take the record yet (it is retried in the background).
    const service = (recorded: { costUsd: string; tier: string } | undefined) => ({
      generation_id: generationId,
      tier: recorded?.tier ?? tier ?? 'passthrough',
      routed_model: target.model.id,
      region: target.model.region,
      cost_usd: recorded?.costUsd ?? null,
    });

    if (!request.stream) {
      const body = (await response.json().catch(async (err: unknown) => {
        await this.release(key.reservationId);
        throw upstreamError(new UpstreamUnavailable(`the upstream's answer could not be read (${(err as Error).message})`));
      })) as {
        usage?: { prompt_tokens?: number; completion_tokens?: number };
        choices?: Array<{ message?: { content?: unknown } }>;
      };
      const usage = { input: count(body.usage?.prompt_tokens), output: count(body.usage?.completion_tokens) };
      const recorded = await record(usage);
      const answer = typeof body.choices?.[0]?.message?.content === 'string' ? body.choices[0].message.content : '';
      if (conversationId !== undefined) await this.storeExchange(key.workspaceId, conversationId, request, answer);
      reply.json(200, headers, { ...body, service: service(recorded) });
      return;
    }

    reply.startStream(headers);
    let usage: { input: number; output: number } | undefined;
    let answer = '';
    let deltas = 0;
    let last: { id?: string; created?: number; model?: string } = {};
    let failure: unknown;
    try {
      for await (const event of readEvents(response.body!, this.deps.settings.idleTimeoutMs, AbortSignal.any([reply.signal, this.stopping.signal]))) {
        if (event.data === '[DONE]') break;
        await reply.write(event.raw);
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
            answer += content;
            deltas += 1;
          }
        } catch {
          // Not JSON (a comment, a keep-alive): passed on, nothing to learn from it.
        }
      }
    } catch (err) {
      failure = err;
    }
    // A client that went away, or a stream cut short, is billed for what was produced: the
    // upstream's usage when it came, else the prompt and one token per delta.
    // Without the upstream's count the prompt is billed at the usual 4 bytes a token (the
    // reservation's bound of a token a byte would overcharge it).
    const billed = usage ?? { input: Math.ceil(request.bodyBytes / 4), output: deltas };
    const recorded = await record(billed);
    if (reply.signal.aborted) {
      this.deps.log.info({ generation_id: generationId, output_tokens: billed.output }, 'the client went away mid-stream; billed what was produced');
      return;
    }
    if (failure) {
      this.deps.log.warn({ err: (failure as Error).message, generation_id: generationId }, 'the upstream stream failed');
      await reply.write(
        `data: ${JSON.stringify({ error: { code: 'upstream_error', message: 'The upstream stream ended early.', type: 'api_error', param: null } })}\n\n`,
      );
      reply.end();
      return;
    }
    if (conversationId !== undefined) await this.storeExchange(key.workspaceId, conversationId, request, answer);
    const final = {
      id: last.id ?? generationId,
      object: 'chat.completion.chunk',
      created: last.created ?? Math.floor(Date.now() / 1000),
      model: last.model ?? target.model.id,
      choices: [],
      service: service(recorded),
    };
    await reply.write(`data: ${JSON.stringify(final)}\n\ndata: [DONE]\n\n`);
    reply.end();
  }

  /**
   * RecordUsage. When billing cannot take it now, the answer goes out without its cost and the
   * record is tried again in the background (idempotent by generation id), so a generation that
   * was produced is never left unbilled by a short billing outage.
   */
  private async recordUsage(input: MessageInitShape<typeof RecordUsageRequestSchema>): Promise<{ costUsd: string; tier: string } | undefined> {
    try {
      return await this.deps.usage.recordUsage(input, { timeoutMs: internalTimeoutMs });
    } catch (err) {
      this.deps.log.warn({ err: (err as Error).message, generation_id: input.generationId }, 'could not record usage; retrying in the background');
      void this.track(this.retryRecord(input));
      return undefined;
    }
  }

  private async retryRecord(input: MessageInitShape<typeof RecordUsageRequestSchema>): Promise<void> {
    for (const delayMs of recordRetryDelaysMs) {
      await new Promise((resolve) => setTimeout(resolve, this.stopping.signal.aborted ? Math.min(delayMs, 1000) : delayMs));
      try {
        await this.deps.usage.recordUsage(input, { timeoutMs: internalTimeoutMs });
        return;
      } catch (err) {
        this.deps.log.warn({ err: (err as Error).message, generation_id: input.generationId }, 'usage record retry failed');
      }
    }
    this.deps.log.error(
      { generation_id: input.generationId, key_id: input.keyId, workspace_id: input.workspaceId },
      'usage could not be recorded: billing kept refusing it',
    );
  }

  /** AuthorizeKey; a refused key is its error of the catalogue (docs/api/keys.md, docs/api/billing.md). */
  async authorize(fullKey: string, estimatedCostUsd?: string): Promise<Authorized> {
    const answer = await this.deps.keys.authorizeKey({ fullKey, estimatedCostUsd }, { timeoutMs: internalTimeoutMs });
    const refusal = keyRefusalError(answer, 'front-door');
    if (refusal) throw refusal;
    return {
      keyId: answer.keyId,
      workspaceId: answer.workspaceId,
      policy: (answer.routingPolicy || 'any') as RoutingPolicy,
      reservationId: answer.reservationId,
    };
  }

  /** The model to call first: RouteModel's pick for a service tier, else the catalog model the key's policy allows. */
  private async firstTarget(tier: ServiceTier | undefined, passthrough: CatalogModel[] | undefined, policy: RoutingPolicy, requested: string): Promise<Target> {
    if (tier) {
      const routed = await this.deps.routing.routeModel({ tier, routingPolicy: policy }, { timeoutMs: internalTimeoutMs }).catch((err: unknown) => {
        throw policyError(err) ?? err;
      });
      return this.target(this.deps.catalog.models.find((model) => model.id === routed.model && model.region === routed.region));
    }
    const allowed = passthrough?.find((model) => policyAllows(policy, model.region));
    if (!allowed) {
      throw new ApiError(403, 'routing_policy_violation', `The model ${requested} is served only in a region this key's ${policy} routing policy excludes.`, {
        field: 'model',
      });
    }
    return this.target(allowed);
  }

  /**
   * Before the refusal is answered, so the client's next request finds the room free. Best
   * effort: a reservation that is not released expires after RESERVATION_TTL anyway.
   */
  private async release(reservationId: string | undefined): Promise<void> {
    if (!reservationId) return;
    await this.deps.keys
      .releaseReservation({ reservationId }, { timeoutMs: internalTimeoutMs })
      .catch((err: unknown) =>
        this.deps.log.warn({ err: (err as Error).message, reservation_id: reservationId }, 'could not release a reservation; it expires on its own'),
      );
  }

  private target(model: CatalogModel | undefined): Target {
    const region = model && this.deps.catalog.regions.get(model.region);
    if (!model || !region) throw new ApiError(503, 'service_unavailable', 'The routed model is not in this data plane’s catalog; try again shortly.');
    return { model, region };
  }

  /** The first target, then (a service tier only) once another candidate the policy allows. */
  private async callWithFailover(first: Target, tier: ServiceTier | undefined, policy: RoutingPolicy, request: ChatRequest, signal: AbortSignal) {
    const settings = { headersTimeoutMs: this.deps.settings.headersTimeoutMs, apiKeys: this.deps.settings.upstreamApiKeys, signal };
    try {
      return { response: await callUpstream(first, request.body, settings), target: first };
    } catch (err) {
      if (err instanceof UpstreamRejected) throw new ApiError(400, 'upstream_rejected', `The model provider refused the request: ${err.message}`);
      if (!(err instanceof UpstreamUnavailable)) throw err;
      const second = tier
        ? this.deps.catalog
            .candidates(tier)
            .find((model) => model !== first.model && policyAllows(policy, model.region) && this.deps.catalog.regions.has(model.region))
        : undefined;
      this.deps.log.warn({ model: first.model.id, err: err.message, failover: second?.id ?? null }, 'upstream failed before its first byte');
      if (!second) throw upstreamError(err);
      const target = this.target(second);
      try {
        return { response: await callUpstream(target, request.body, settings), target };
      } catch (again) {
        if (again instanceof UpstreamRejected) throw new ApiError(400, 'upstream_rejected', `The model provider refused the request: ${again.message}`);
        if (again instanceof UpstreamUnavailable) throw upstreamError(again);
        throw again;
      }
    }
  }

  private async append(workspaceId: string, conversationId: string, messages: Array<{ role: string; content: string }>): Promise<void> {
    await this.deps.exchanges.appendExchange({ workspaceId, conversationId, messages }, { timeoutMs: internalTimeoutMs });
  }

  /** The request's last user message and the answer, in the conversation asked for. */
  private async storeExchange(workspaceId: string, conversationId: string, request: ChatRequest, answer: string): Promise<void> {
    // Postgres text cannot hold NUL: it is stored as U+FFFD rather than losing the exchange.
    const storable = (text: string) => text.replaceAll('\u0000', '\ufffd');
    const messages = [];
    const question = lastUserMessage(request);
    if (question) messages.push({ role: 'user', content: storable(question) });
    if (answer) messages.push({ role: 'assistant', content: storable(answer) });
    await this.append(workspaceId, conversationId, messages).catch((err: unknown) =>
      this.deps.log.error({ err: (err as Error).message, conversation_id: conversationId }, 'could not store the exchange in its conversation'),
    );
  }
}

function count(value: number | undefined): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : 0;
}

function upstreamError(err: UpstreamUnavailable): ApiError {
  return new ApiError(502, 'upstream_error', `The model provider failed: ${err.message}.`);
}

/** RouteModel's refusal when no candidate of the tier is allowed by the policy. */
function policyError(err: unknown): ApiError | undefined {
  const connect = ConnectError.from(err);
  if (connect.code !== Code.FailedPrecondition) return undefined;
  return new ApiError(403, 'routing_policy_violation', connect.rawMessage, { field: 'model' });
}
