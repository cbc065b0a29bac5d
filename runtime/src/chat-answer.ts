/**
 * An OpenAI chat completion made of given words, in both of its shapes: the JSON of a completion
 * and the events of a stream (`chat.completion.chunk`s, a final usage chunk when
 * `stream_options.include_usage` asks for it). What answers without a model shares it: the data
 * plane's demo upstream (data-plane/src/demo-upstream.ts) and the fake upstream of the tests and
 * benchmarks (runtime/src/dev/openai-upstream.ts). A word is a token; the answer stops at
 * `max_completion_tokens` or `max_tokens` (the smaller when both are sent); the prompt counts one token per 4 characters of message
 * text.
 */

export interface ChatAnswer {
  id: string;
  created: number;
  model: string;
  /** The answer's tokens, within the request's limit. */
  tokens: string[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/** The answer of `words` to a chat completion request's body. */
export function chatAnswer(body: Record<string, unknown>, words: readonly string[]): ChatAnswer {
  const messages = Array.isArray(body.messages) ? (body.messages as Array<{ content?: unknown }>) : [];
  const promptTokens = Math.ceil(messages.reduce((sum, message) => sum + (typeof message.content === 'string' ? message.content.length : 0), 0) / 4);
  const limits = [body.max_completion_tokens, body.max_tokens].filter((value): value is number => typeof value === 'number');
  const tokens = words.slice(0, Math.min(Number.POSITIVE_INFINITY, ...limits));
  return {
    id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
    created: Math.floor(Date.now() / 1000),
    model: String(body.model),
    tokens,
    usage: { prompt_tokens: promptTokens, completion_tokens: tokens.length, total_tokens: promptTokens + tokens.length },
  };
}

/** The answer as a non-streamed completion. */
export function completionBody(answer: ChatAnswer): Record<string, unknown> {
  return {
    id: answer.id,
    object: 'chat.completion',
    created: answer.created,
    model: answer.model,
    choices: [{ index: 0, message: { role: 'assistant', content: answer.tokens.join(' ') }, finish_reason: 'stop' }],
    usage: answer.usage,
  };
}

/**
 * The answer as a stream: its events' data, one chunk per token (the role first, the finish
 * reason last, then the usage when asked for), and `[DONE]`. Each is sent as `data: <it>\n\n`.
 */
export function* streamEvents(answer: ChatAnswer, body: Record<string, unknown>): Generator<string> {
  const { id, created, model } = answer;
  const chunk = (delta: Record<string, unknown>, finish: string | null) =>
    JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason: finish }] });
  yield chunk({ role: 'assistant', content: '' }, null);
  for (const [i, token] of answer.tokens.entries()) yield chunk({ content: i === 0 ? token : ` ${token}` }, null);
  yield chunk({}, 'stop');
  if ((body.stream_options as { include_usage?: boolean } | undefined)?.include_usage) {
    yield JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: answer.usage });
  }
  yield '[DONE]';
}
