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
 */
export async function sendChat(apiKey: string, model: string, message: string, signal?: AbortSignal): Promise<Completion> {
  const response = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: message }] }),
    signal,
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's error page): the error keeps the text.
  }
  if (!response.ok) throw SwitchboardError.fromResponse(response, body);
  const completion = body as {
    model: string;
    choices?: { message?: { content?: string | null } }[];
    usage?: Completion['usage'];
    service?: ServiceInfo;
  };
  return { answer: completion.choices?.[0]?.message?.content ?? '', model: completion.model, usage: completion.usage, service: completion.service };
}
