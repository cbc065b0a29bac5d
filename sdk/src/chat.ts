import { SwitchboardError } from './errors.js';
import type { ResultOf } from './resources.js';
import type { components } from './schema.js';
import type { CallSettings, RequestOptions, Transport } from './transport.js';

type Schemas = components['schemas'];

/**
 * The front door's types come from the generated document (sdk/src/schema.ts) where it describes
 * them exactly. Where it leaves a shape open (OpenAI's messages, choices and stream chunks, which
 * the platform passes through as the upstream wrote them) the SDK refines it by hand; `Refine`
 * makes such a refinement fail to compile once it no longer fits what the document says.
 */
type Refine<Generated, T extends Generated> = T;
type GeneratedRequest = Schemas['ChatCompletionRequest'];

/**
 * A message of a conversation with a model, as OpenAI's API writes it. By hand: the document
 * types a message as an open object (`role: string`, `content` of unknown parts).
 */
export type ChatMessage = Refine<
  GeneratedRequest['messages'][number],
  {
    role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
    content: string | Array<{ type: 'text'; text: string }> | null;
    name?: string;
    tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
    tool_call_id?: string;
  }
>;

/**
 * The parameters the front door accepts (docs/api/front-door.md#parameters); any other is a 400
 * `unsupported_parameter`. The document's `ChatCompletionRequest`, except:
 * - `n` and `stream` are optional: the document has them optional with a default, which
 *   openapi-typescript renders as required;
 * - `stream_options`, `response_format`, `tools` and `tool_choice` are open objects in the
 *   document, which openapi-typescript renders as `Record<string, never>` (no key allowed);
 * - `messages` are ChatMessage (above).
 */
export type ChatCompletionCreateParams = Omit<GeneratedRequest, 'n' | 'stream' | 'messages' | 'stream_options' | 'response_format' | 'tools' | 'tool_choice'> &
  Partial<Pick<GeneratedRequest, 'n' | 'stream'>> & {
    messages: ChatMessage[];
    stream_options?: { include_usage?: boolean };
    response_format?: Record<string, unknown>;
    tools?: Array<Record<string, unknown>>;
    tool_choice?: string | Record<string, unknown>;
  };

/**
 * The model's message in an answer. By hand: the document types `choices` as open objects
 * (OpenAI's, as the upstream answered them).
 */
export interface AssistantMessage {
  role: 'assistant';
  content: string | null;
  tool_calls?: ChatMessage['tool_calls'];
}

/** What the platform adds to an answer: the generation id `POST /v1/feedback` takes, the routing and the exact cost. */
export type ServiceInfo = Schemas['ChatCompletionService'];

/** Token counts as the upstream reported them (what is billed when present). */
export type ChatCompletionUsage = NonNullable<Schemas['ChatCompletion']['usage']>;

/** A non-streamed answer (docs/api/front-door.md#responses): the document's, with OpenAI's choices typed by hand. */
export type ChatCompletion = Schemas['ChatCompletion'] & {
  choices: Array<{ index: number; message: AssistantMessage; finish_reason: string | null }>;
};

/**
 * One event of a stream; the last one before `[DONE]` carries `service` (docs/api/front-door.md#responses).
 * By hand: the document gives the stream as `text/event-stream` text, with no schema of a chunk.
 */
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
export type Model = Schemas['Model'];

export interface Models {
  /** `GET /v1/models`: the two service tiers, then the catalog's models the key may use. */
  list(options?: RequestOptions): Promise<Schemas['ModelList']>;
}

export function createModels(call: (method: 'get', url: string, init?: Record<string, unknown>) => Promise<unknown>): Models {
  return { list: (options = {}) => call('get', '/v1/models', { ...options }) as Promise<ResultOf<'/v1/models', 'get'>> };
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
