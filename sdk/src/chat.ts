import { SwitchboardError } from './errors.js';
import type { CallSettings, RequestOptions, Transport } from './transport.js';

/** A message of a conversation with a model, as OpenAI's API writes it. */
export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content: string | Array<{ type: 'text'; text: string }> | null;
  name?: string;
  tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

/** The parameters the front door accepts (docs/api/front-door.md#parameters); any other is a 400 `unsupported_parameter`. */
export interface ChatCompletionCreateParams {
  /** `service/fast`, `service/balanced` (a tier the platform routes), or a model id of the catalog. */
  model: string;
  messages: ChatMessage[];
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  top_p?: number;
  n?: number;
  stop?: string | string[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  presence_penalty?: number;
  frequency_penalty?: number;
  logit_bias?: Record<string, number>;
  logprobs?: boolean;
  top_logprobs?: number;
  seed?: number;
  user?: string;
  response_format?: Record<string, unknown>;
  tools?: Array<Record<string, unknown>>;
  tool_choice?: string | Record<string, unknown>;
  parallel_tool_calls?: boolean;
}

/** The model's message in an answer. */
export interface AssistantMessage {
  role: 'assistant';
  content: string | null;
  tool_calls?: ChatMessage['tool_calls'];
}

/** What the platform adds to an answer: the generation id `POST /v1/feedback` takes, the routing and the exact cost. */
export interface ServiceInfo {
  generation_id: string;
  tier: string;
  routed_model: string;
  region: string;
  /** What billing debits, a decimal string in USD. */
  cost_usd: string;
}

export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** A non-streamed answer (docs/api/front-door.md#responses). */
export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{ index: number; message: AssistantMessage; finish_reason: string | null }>;
  usage?: ChatCompletionUsage;
  service: ServiceInfo;
}

/** One event of a stream; the last one before `[DONE]` carries `service` (docs/api/front-door.md#responses). */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{ index: number; delta: Partial<AssistantMessage>; finish_reason: string | null }>;
  usage?: ChatCompletionUsage | null;
  service?: ServiceInfo;
}

/** The chunks of a streamed answer, read as they arrive; `abort()` stops it (what was produced is billed). */
export interface ChatCompletionStream extends AsyncIterable<ChatCompletionChunk> {
  /** The answer's headers (`X-Service-Generation-Id`, the key's rate-limit headers, …). */
  readonly response: Response;
  abort(): void;
}

/** Options of a front-door call. */
export interface ChatRequestOptions extends Omit<RequestOptions, 'idempotencyKey' | 'workspaceId'> {
  /** Appends the exchange to this conversation of the key's workspace (`X-Service-Conversation-Id`). */
  conversationId?: string;
}

export interface Chat {
  completions: {
    /**
     * A chat completion at the front door (API keys only). Retried on 429 and 503, which the front
     * door answers before anything goes upstream (docs/api/front-door.md#errors); never after a
     * lost connection, since a completion has no idempotency key and a repeat would be billed again.
     */
    create(params: ChatCompletionCreateParams & { stream: true }, options?: ChatRequestOptions): Promise<ChatCompletionStream>;
    create(params: ChatCompletionCreateParams & { stream?: false }, options?: ChatRequestOptions): Promise<ChatCompletion>;
    create(params: ChatCompletionCreateParams, options?: ChatRequestOptions): Promise<ChatCompletion | ChatCompletionStream>;
  };
}

/** The front door's `POST /v1/chat/completions`. */
export function createChat(deps: { baseUrl: string; transport: Transport; settings: (options: RequestOptions) => CallSettings }): Chat {
  async function create(params: ChatCompletionCreateParams, options: ChatRequestOptions = {}): Promise<ChatCompletion | ChatCompletionStream> {
    const { conversationId, headers, ...call } = options;
    const controller = new AbortController();
    const signal = call.signal ? AbortSignal.any([call.signal, controller.signal]) : controller.signal;
    const request = new Request(`${deps.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers, ...(conversationId ? { 'x-service-conversation-id': conversationId } : {}) },
      body: JSON.stringify(params),
    });
    const response = await deps.transport.send(request, { ...deps.settings({ ...call, signal }), idempotent: false, retry503WithoutKey: true });
    if (!response.ok) throw SwitchboardError.fromResponse(response, await bodyOf(response));
    if (!params.stream) return (await response.json()) as ChatCompletion;
    return { response, abort: () => controller.abort(), [Symbol.asyncIterator]: () => chunks(response) };
  }
  return { completions: { create: create as Chat['completions']['create'] } };
}

/** A model the front door serves (docs/api/front-door.md#the-model-list). */
export interface Model {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  region?: string;
  tiers: string[];
  pricing: { input_usd_per_1m: string; output_usd_per_1m: string };
  demo: boolean;
}

export interface Models {
  /** `GET /v1/models`: the two service tiers, then the catalog's models the key may use. */
  list(options?: RequestOptions): Promise<{ object: 'list'; data: Model[] }>;
}

export function createModels(call: (method: 'get', url: string, init?: Record<string, unknown>) => Promise<unknown>): Models {
  return { list: (options = {}) => call('get', '/v1/models', { ...options }) as Promise<{ object: 'list'; data: Model[] }> };
}

/** The parsed body of an error answer (JSON, else its text). */
async function bodyOf(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The chunks of a server-sent event stream: each event's `data:` lines hold one JSON chunk, the
 * stream ends with `data: [DONE]`. An event `{"error": …}` is the front door cutting the stream
 * (docs/api/front-door.md#streams): it is thrown, as a 503 for `service_unavailable`, else a 502.
 */
async function* chunks(response: Response): AsyncGenerator<ChatCompletionChunk> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    for (let end = buffer.search(/\r?\n\r?\n/); end !== -1; end = buffer.search(/\r?\n\r?\n/)) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n');
      if (!data) continue;
      if (data === '[DONE]') return;
      const parsed = JSON.parse(data) as ChatCompletionChunk | { error: { code: string } };
      if ('error' in parsed) {
        const status = parsed.error.code === 'service_unavailable' ? 503 : 502;
        throw SwitchboardError.fromResponse(new Response(null, { status, headers: response.headers }), parsed);
      }
      yield parsed;
    }
  }
}
