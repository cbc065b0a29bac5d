import { ApiError } from '@switchboard/runtime/api-error';

/**
 * A chat completion request as the front door checks it: the fields it acts on are validated,
 * the rest goes upstream untouched (OpenAI-compatible parameters the platform does not read).
 */
export interface ChatRequest {
  model: string;
  stream: boolean;
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

function invalid(field: string, message: string): ApiError {
  return new ApiError(400, 'invalid_request', message, { field: field || undefined });
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

/** The text of a message's content: a string, or the text parts of an array of parts. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => (part && typeof part === 'object' && (part as { type?: unknown }).type === 'text' ? String((part as { text?: unknown }).text ?? '') : ''))
    .join('');
}

/** The request's last user message, the one stored with the answer in a conversation. */
export function lastUserMessage(request: ChatRequest): string {
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
