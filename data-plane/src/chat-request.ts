import type { ApiError } from '@switchboard/runtime/api-error';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';

/**
 * A chat completion request as the front door checks it: the fields it acts on are validated,
 * the other parameters of the allow-list go upstream untouched.
 */
export interface ChatRequest {
  model: string;
  stream: boolean;
  /**
   * The output bound: `max_tokens`, else `max_completion_tokens` (the larger when both are sent,
   * since an upstream may honour either); undefined when neither is.
   */
  maxTokens?: number;
  /** How many choices the upstream generates (`n`, 1..16). */
  choices: number;
  messages: Array<{ role: string; content: unknown }>;
  /** The request body's size: a bound on the prompt's text, tools and schemas. */
  bodyBytes: number;
  /** The body as sent, for the upstream. */
  body: Record<string, unknown>;
}

const maxMessages = 10_000;

/**
 * The parameters an upstream request may carry (docs/api/front-door.md#parameters): those whose
 * output the price list can bill. Another (`audio`, `web_search_options`, …) could make the
 * upstream produce or charge for what no price covers, so it is refused rather than passed on.
 */
export const supportedParameters: ReadonlySet<string> = new Set([
  'model',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'n',
  'stop',
  'stream',
  'stream_options',
  'presence_penalty',
  'frequency_penalty',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'seed',
  'user',
  'response_format',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
]);

/** The longest parameter name an answer repeats: the name comes from the client, the answer stays small. */
const maxParamChars = 100;

function invalid(field: string, message: string): ApiError {
  return catalogued(errorCatalogue.invalidRequest, { problem: message }, { field: field || undefined }, 'front-door');
}

/** Choices one request may ask for: each is generated and billed. */
const maxChoices = 16;
/** Prompt tokens assumed for an image part (a detailed image costs about this many). */
const tokensPerImage = 2000;

export function parseChatRequest(json: unknown, bodyBytes: number): ChatRequest {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw invalid('', 'The request body must be a JSON object.');
  const body = json as Record<string, unknown>;
  if (typeof body.model !== 'string' || body.model.trim() === '') throw invalid('model', 'model is required: service/fast, service/balanced or a model id.');
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw invalid('messages', 'messages must be a non-empty array.');
  if (body.messages.length > maxMessages) throw invalid('messages', `messages may hold at most ${maxMessages} entries.`);
  body.messages.forEach((message, index) => {
    if (message === null || typeof message !== 'object' || Array.isArray(message)) throw invalid(`messages[${index}]`, 'Each message must be an object.');
    if (typeof (message as { role?: unknown }).role !== 'string') throw invalid(`messages[${index}].role`, 'Each message needs a role.');
  });
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') throw invalid('stream', 'stream must be true or false.');
  let maxTokens: number | undefined;
  for (const field of ['max_tokens', 'max_completion_tokens']) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) throw invalid(field, `${field} must be a positive integer.`);
    maxTokens = Math.max(maxTokens ?? 0, value);
  }
  const n = body.n ?? 1;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > maxChoices) throw invalid('n', `n must be an integer from 1 to ${maxChoices}.`);
  return { model: body.model, stream: body.stream === true, maxTokens, choices: n, messages: body.messages as ChatRequest['messages'], bodyBytes, body };
}

/**
 * 400 `unsupported_parameter` naming the request's first parameter outside the allow-list, or
 * undefined when it has none. Not thrown by parseChatRequest: it is input, answered only once the
 * key is known to be good (docs/conventions.md#order-of-checks).
 */
export function unsupportedParameter(request: ChatRequest): ApiError | undefined {
  for (const name in request.body) {
    if (supportedParameters.has(name)) continue;
    const param = name.slice(0, maxParamChars);
    return catalogued(errorCatalogue.unsupportedParameter, { param }, { field: param }, 'front-door');
  }
  return undefined;
}

/** The text of a message's content: a string, or the text parts of an array of parts. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => (part && typeof part === 'object' && (part as { type?: unknown }).type === 'text' ? String((part as { text?: unknown }).text ?? '') : ''))
    .join('');
}

/** The request's last user message, the one stored with the answer in a conversation (and the demo upstream echoes). */
export function lastUserMessage(request: Pick<ChatRequest, 'messages'>): string {
  const message = request.messages.findLast((m) => m.role === 'user');
  return message ? textOf(message.content) : '';
}

/**
 * More prompt tokens than the request can hold: a token is at least one byte of the body (text,
 * tools, schemas), and an image part counts as a detailed image. For the estimate only; the
 * upstream reports the real count.
 */
export function promptTokenBound(request: ChatRequest): number {
  const images = request.messages.reduce(
    (sum, message) =>
      sum + (Array.isArray(message.content) ? message.content.filter((part) => (part as { type?: unknown } | null)?.type === 'image_url').length : 0),
    0,
  );
  return request.bodyBytes + images * tokensPerImage;
}
