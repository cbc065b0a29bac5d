import { chatAnswer, completionBody, streamEvents } from '@switchboard/runtime/chat-answer';
import type { CatalogModel, CatalogRegion } from '@switchboard/runtime/model-catalog';
import { type ChatRequest, lastUserMessage } from './chat-request.js';

/**
 * The demo upstream (docs/api/front-door.md#the-demo-upstream): with DEMO_UPSTREAM=true, a
 * region whose `api_key_env` is unset or empty is answered here, in this process, instead of at
 * its base URL, so that `npm start` without a provider key still answers a completion. The
 * answer is a fixed sentence that says what it is, names the model, the region and the missing
 * variable, and echoes the start of the last user message; it streams and counts usage like an
 * upstream, so the rest of the request (reservation, billing, conversations) runs as for a real
 * one. Nothing leaves the process. A production start refuses DEMO_UPSTREAM=true (config.ts).
 */

/** The most characters of the user's message the answer repeats. */
const echoChars = 60;

/** The demo's answer to `body` (the request as it would go upstream), as a fetch would return it. */
export function demoUpstream(target: { model: CatalogModel; region: CatalogRegion }, body: Record<string, unknown>): Response {
  const said = lastUserMessage({ messages: Array.isArray(body.messages) ? (body.messages as ChatRequest['messages']) : [] })
    .replace(/\s+/g, ' ')
    .trim();
  const echo = said.length > echoChars ? `${said.slice(0, echoChars - 1)}…` : said;
  const sentence =
    `This is Switchboard's demo upstream, answering as ${target.model.id} in the ${target.model.region} region because ` +
    `${target.region.apiKeyEnv} is not set; nothing left this machine. You said: "${echo}"`;
  const answer = chatAnswer(body, sentence.split(' '));
  if (body.stream !== true) return new Response(JSON.stringify(completionBody(answer)), { headers: { 'content-type': 'application/json' } });
  const events = streamEvents(answer, body);
  const encoder = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    // One event per read: a reader that stops reading stops the answer.
    pull(controller) {
      const next = events.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(`data: ${next.value}\n\n`));
    },
  });
  return new Response(stream, { headers: { 'content-type': 'text/event-stream' } });
}
