import { SwitchboardError } from '@switchboard/sdk';

/** The `service` object the front door adds to a completion (docs/api/front-door.md). */
export interface ServiceInfo {
  generation_id: string;
  tier: string;
  routed_model: string;
  region: string;
  cost_usd: string;
}

export interface Completion {
  answer: string;
  model: string;
  usage?: { prompt_tokens: number; completion_tokens: number };
  service?: ServiceInfo;
}

/**
 * One chat completion through the front door, as a user's code sends it: same origin,
 * `Authorization: Bearer <API key>`, no session and no workspace header (the key decides both).
 * The front door is the OpenAI-compatible API, not the one the SDK describes, so this is the one
 * place the dashboard calls fetch itself. A refusal is thrown as the SDK's SwitchboardError (its
 * body has the same `error` shape), so forms show it as any other.
 *
 * With `onDelta`, the answer is streamed (`stream: true`): `onDelta` gets the text so far as each
 * chunk arrives, and the `service` object comes in the last chunk (docs/api/front-door.md).
 */
export async function sendChat(
  apiKey: string,
  model: string,
  message: string,
  options: { signal?: AbortSignal; onDelta?(answer: string): void } = {},
): Promise<Completion> {
  const stream = options.onDelta !== undefined;
  const response = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: message }], ...(stream ? { stream: true } : {}) }),
    signal: options.signal,
  });
  if (!response.ok) throw SwitchboardError.fromResponse(response, parsed(await response.text()));
  if (options.onDelta && response.body) return readStream(response, response.body, options.onDelta);
  const completion = parsed(await response.text()) as {
    model: string;
    choices?: { message?: { content?: string | null } }[];
    usage?: Completion['usage'];
    service?: ServiceInfo;
  };
  return { answer: completion.choices?.[0]?.message?.content ?? '', model: completion.model, usage: completion.usage, service: completion.service };
}

/** The body as JSON, or its text when it is none (a proxy's error page). */
function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

interface Chunk {
  model?: string;
  choices?: { delta?: { content?: string | null } }[];
  usage?: Completion['usage'] | null;
  service?: ServiceInfo;
  error?: unknown;
}

/** Reads the server-sent events of a streamed completion: the deltas, then the usage and `service` of the last chunks; an `error` event is thrown. */
async function readStream(response: Response, body: ReadableStream<Uint8Array>, onDelta: (answer: string) => void): Promise<Completion> {
  const completion: Completion = { answer: '', model: '' };
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    buffer += decoder.decode(value, { stream: !done });
    const events = buffer.split('\n\n');
    buffer = done ? '' : (events.pop() ?? '');
    for (const event of events) {
      const data = event
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trim())
        .join('\n');
      if (!data || data === '[DONE]') continue;
      const chunk = parsed(data) as Chunk;
      if (chunk.error) throw SwitchboardError.fromResponse(response, chunk);
      completion.model = chunk.model ?? completion.model;
      const delta = chunk.choices?.[0]?.delta?.content;
      if (delta) {
        completion.answer += delta;
        onDelta(completion.answer);
      }
      if (chunk.usage) completion.usage = chunk.usage;
      if (chunk.service) completion.service = chunk.service;
    }
    if (done) return completion;
  }
}
