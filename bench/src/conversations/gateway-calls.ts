import { round } from '../measure/latency.js';
import { closedLoop } from '../measure/loop.js';
import type { BenchSession } from '../measure/session.js';
import { content, conversations, fillConcurrency, listLimit, listMessages } from './settings.js';

/** One request through the gateway as the user: the parsed JSON of an answer with the expected status. */
export async function call(gatewayUrl: string, token: string, method: string, pathname: string, expected: number, body?: unknown): Promise<unknown> {
  const response = await fetch(`${gatewayUrl}${pathname}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  if (response.status !== expected) throw new Error(`${method} ${pathname} answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as unknown;
}

async function createConversation(gatewayUrl: string, token: string, title: string): Promise<string> {
  const json = (await call(gatewayUrl, token, 'POST', '/v1/conversations', 201, { title, metadata: { bench: 'conversations' } })) as {
    conversation_id?: string;
  };
  if (!json.conversation_id) throw new Error(`POST /v1/conversations: no conversation_id in ${JSON.stringify(json).slice(0, 500)}`);
  return json.conversation_id;
}

/** Appends `count` messages to the conversation, `fillConcurrency` at a time. */
async function fill(gatewayUrl: string, token: string, conversationId: string, count: number): Promise<void> {
  await closedLoop(fillConcurrency, { maxCalls: count }, async (n) => {
    await call(gatewayUrl, token, 'POST', `/v1/conversations/${conversationId}/messages`, 201, {
      role: n % 2 === 0 ? 'user' : 'assistant',
      content,
    });
  });
}

/**
 * The conversations of the run, through the gateway as the user: `conversations` to append to,
 * and one filled with `listMessages` messages whose first page is checked before any load.
 */
export async function prepareConversations(session: BenchSession, gatewayUrl: string, token: string) {
  session.progress(`creating ${conversations} conversations to append to, and one of ${listMessages} messages to list`);
  const appendTo: string[] = [];
  for (let i = 0; i < conversations; i++) appendTo.push(await createConversation(gatewayUrl, token, `bench append ${i + 1}`));
  const listed = await createConversation(gatewayUrl, token, 'bench list');
  const fillStarted = performance.now();
  await fill(gatewayUrl, token, listed, listMessages);
  const fillSeconds = round((performance.now() - fillStarted) / 1000);
  // The listing answers what it should before any load: the first 100 of the filled conversation, more after them.
  const page = (await call(gatewayUrl, token, 'GET', `/v1/conversations/${listed}/messages?limit=${listLimit}`, 200)) as {
    data?: Array<{ content?: string }>;
    has_more?: boolean;
  };
  if (page.data?.length !== listLimit || page.has_more !== true || page.data[0].content !== content)
    throw new Error(`GET …/messages?limit=${listLimit}: ${page.data?.length} messages, has_more ${page.has_more}; expected ${listLimit} and true`);
  return { appendTo, listed, fillSeconds, listBytes: Buffer.byteLength(JSON.stringify(page)) };
}

export type Prepared = Awaited<ReturnType<typeof prepareConversations>>;
