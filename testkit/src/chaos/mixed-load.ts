import { type Client, Code, ConnectError } from '@connectrpc/connect';
import { EventService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { createKey, registerUserWithPassword } from '../gateway-accounts.js';

/**
 * The steady mixed load of a chaos run, as careful clients would send it: sign-ins, API key
 * checks (a chat completion through the front door, which also records usage), conversation
 * appends (REST, through the gateway) and agent.completed events (the agent runtime's internal
 * EventService/PublishEvent, straight to webhooks, with an idempotency key). Every attempt has a
 * deadline; a clean retryable answer (503 with Retry-After, a refused connection, a mesh
 * Unavailable) is retried after Retry-After, anything else ends the operation as failed. What was
 * acknowledged is kept for the invariants.
 */

export type OperationKind = 'sign-in' | 'key-check' | 'append' | 'event';
export const operationKinds: OperationKind[] = ['sign-in', 'key-check', 'append', 'event'];

/**
 * How one attempt ended. `unavailable` (503 + Retry-After; Unavailable from the mesh) and
 * `refused` (nothing was sent) are the clean retryable answers; the rest of the failures break an
 * invariant (`timeout`: no answer within the deadline; `reset`: a connection to the gateway
 * dropped; `error`: any other status, a 503 without Retry-After included).
 */
export type Outcome = 'ok' | 'unavailable' | 'refused' | 'timeout' | 'reset' | 'error';
export const retryable = new Set<Outcome>(['unavailable', 'refused']);

export interface Attempt {
  kind: OperationKind;
  /** Date.now() when the attempt was sent. */
  at: number;
  ms: number;
  outcome: Outcome;
  /** For `error`: the status or error code, and the start of the answer. */
  detail?: string;
}

/**
 * The account the load acts as: one user, its workspace, an API key, a conversation and a
 * webhook endpoint; and the users who sign in (one after another: a person does not sign in ten
 * times a second, and the login throttle refuses a burst of one account's attempts).
 */
export interface LoadAccount {
  signIns: Array<{ email: string; password: string }>;
  /** The access token of the user (refreshed by its sign-ins). */
  token: string;
  workspaceId: string;
  keyId: string;
  fullKey: string;
  conversationId: string;
  webhookId: string;
}

export interface LoadOptions {
  /** Operations started per second, over all workers (the four kinds in turn). */
  ratePerSecond: number;
  /** Operations in flight at most (each waits for its answer, and for Retry-After between attempts). */
  workers: number;
  /** No answer within this: the attempt is a `timeout`. */
  attemptDeadlineMs: number;
  /** An operation still not acknowledged after this long is given up (lost). */
  operationBudgetMs: number;
}

export const defaultLoadOptions: LoadOptions = { ratePerSecond: 40, workers: 8, attemptDeadlineMs: 10_000, operationBudgetMs: 90_000 };

/** The model of the chaos catalog (world.ts), served by the run's fake upstream. */
export const chaosModel = 'chaos-model';

/** Users who take turns signing in. */
const signInUsers = 20;

/** Registers the account of a run: a user, an API key, a conversation and a webhook endpoint to `webhookUrl`; and the users who sign in. */
export async function prepareAccount(gatewayUrl: string, webhookUrl: string): Promise<LoadAccount> {
  const user = await registerUserWithPassword(gatewayUrl, 'chaos');
  const others: Array<{ email: string; password: string }> = [];
  // One at a time: the password hasher refuses a burst (503) rather than queue it.
  for (let i = 1; i < signInUsers; i++) others.push(await registerUserWithPassword(gatewayUrl, 'chaos-sign-in'));
  const key = await createKey(gatewayUrl, user.accessToken, 'chaos');
  const post = async (pathname: string, body: unknown) => {
    const response = await fetch(`${gatewayUrl}${pathname}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    if (response.status !== 201) throw new Error(`POST ${pathname} answered ${response.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as Record<string, string>;
  };
  const conversation = await post('/v1/conversations', { title: 'chaos' });
  const webhook = await post(`/v1/workspaces/${user.workspaceId}/webhooks`, { url: webhookUrl, events: ['agent.completed'] });
  return {
    signIns: [user, ...others].map(({ email, password }) => ({ email, password })),
    token: user.accessToken,
    workspaceId: user.workspaceId,
    keyId: key.keyId,
    fullKey: key.fullKey,
    conversationId: conversation.conversation_id,
    webhookId: webhook.webhook_id,
  };
}

/** What the load was told was done: the writes the invariants look for. */
export interface Acknowledged {
  signIns: number;
  /** generation_id → cost_usd the front door answered (priced where it answered, settled later). */
  completions: Map<string, string>;
  /** Message content → whether an earlier attempt of it got a retryable answer (it may then be stored twice after a kill -9). */
  appends: Map<string, { retried: boolean }>;
  /** The `seq` of each agent.completed event → its event_id. */
  events: Map<number, string>;
}

type Answer = { outcome: Outcome; detail?: string; value?: unknown };

export class MixedLoad {
  readonly attempts: Attempt[] = [];
  readonly acknowledged: Acknowledged = { signIns: 0, completions: new Map(), appends: new Map(), events: new Map() };
  /** Operations given up: still not acknowledged when their budget ran out, or ended by a non-retryable failure. */
  readonly failedOperations: Array<{ kind: OperationKind; seq: number; last: Outcome; detail?: string }> = [];
  private readonly events: Client<typeof EventService>;
  private readonly runTag = Date.now().toString(36);
  private started = 0;
  private seq = 0;
  private running = false;
  private workers: Promise<void>[] = [];

  constructor(
    private readonly mesh: Mesh,
    private readonly account: LoadAccount,
    private readonly options: LoadOptions = defaultLoadOptions,
  ) {
    // The client an agent runtime of the mesh would use (the data plane's kind of peer client).
    this.events = createPeerClient(EventService, { name: 'webhooks', url: mesh.urls.webhooks }, new MeshTokens(mesh.env.SWITCHBOARD_MESH_SECRET), {
      caller: 'data-plane',
    });
  }

  /** Date.now() when the load started. */
  startedAt = 0;

  start(): void {
    this.running = true;
    this.startedAt = Date.now();
    this.started = performance.now();
    this.workers = Array.from({ length: this.options.workers }, () => this.work());
  }

  /** Stops starting operations and waits for those under way (with their retries). */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.workers);
  }

  /** Attempts under way at some time in [from, to) (Date.now() times): in flight at `from`, or sent later. */
  attemptsBetween(from: number, to: number): Attempt[] {
    return this.attempts.filter((attempt) => attempt.at < to && attempt.at + attempt.ms >= from);
  }

  private async work(): Promise<void> {
    while (this.running) {
      const seq = this.seq++;
      // Paced: operation n starts no earlier than n / rate seconds into the run.
      const due = this.started + (seq / this.options.ratePerSecond) * 1000;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      if (!this.running) return;
      await this.operate(operationKinds[seq % operationKinds.length], seq);
    }
  }

  /** One operation: attempts until acknowledged, a non-retryable failure, or the budget runs out. */
  private async operate(kind: OperationKind, seq: number): Promise<void> {
    const began = performance.now();
    let retried = false;
    for (;;) {
      const at = Date.now();
      const sent = performance.now();
      const answer = await this.attempt(kind, seq);
      this.attempts.push({ kind, at, ms: Math.round(performance.now() - sent), outcome: answer.outcome, detail: answer.detail });
      if (answer.outcome === 'ok') {
        this.acknowledge(kind, seq, retried, answer.value);
        return;
      }
      if (!retryable.has(answer.outcome) || performance.now() - began > this.options.operationBudgetMs) {
        this.failedOperations.push({ kind, seq, last: answer.outcome, detail: answer.detail });
        return;
      }
      retried = true;
      // Retry-After is 1 s on every 503 of the mesh (a refused connection waits as long), plus
      // up to half a second of jitter, as careful clients do: not every retry at the same instant.
      await new Promise((resolve) => setTimeout(resolve, 1000 + Math.random() * 500));
    }
  }

  private acknowledge(kind: OperationKind, seq: number, retried: boolean, value: unknown): void {
    if (kind === 'sign-in') {
      this.acknowledged.signIns++;
      if (this.signInUser(seq) === 0) this.account.token = value as string;
    } else if (kind === 'key-check') {
      const service = value as { generation_id: string; cost_usd: string };
      this.acknowledged.completions.set(service.generation_id, service.cost_usd);
    } else if (kind === 'append') {
      this.acknowledged.appends.set(this.contentOf(seq), { retried });
    } else {
      this.acknowledged.events.set(seq, value as string);
    }
  }

  /** Which of the sign-in users operation `seq` (a sign-in) acts as: each in turn. */
  private signInUser(seq: number): number {
    return Math.floor(seq / operationKinds.length) % this.account.signIns.length;
  }

  private contentOf(seq: number): string {
    return `chaos ${this.runTag} ${seq}`;
  }

  private attempt(kind: OperationKind, seq: number): Promise<Answer> {
    const { account } = this;
    switch (kind) {
      case 'sign-in': {
        const { email, password } = account.signIns[this.signInUser(seq)];
        return this.rest('/v1/auth/login', { email, password }, undefined, 200, (json) => json?.session?.access_token);
      }
      case 'key-check':
        return this.rest(
          '/v1/chat/completions',
          { model: chaosModel, messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 8 },
          account.fullKey,
          200,
          (json) => (json?.service?.generation_id && json.choices?.[0]?.message?.content ? json.service : undefined),
        );
      case 'append':
        return this.rest(
          `/v1/conversations/${account.conversationId}/messages`,
          { role: 'user', content: this.contentOf(seq) },
          account.token,
          201,
          (json) => json?.message_id,
        );
      case 'event':
        return this.publish(seq);
    }
  }

  /** A POST through the gateway; `accept` picks the acknowledged value out of a `status` answer. */
  private async rest(
    pathname: string,
    body: unknown,
    token: string | undefined,
    status: number,
    // biome-ignore lint/suspicious/noExplicitAny: the load reads a few fields of whatever JSON a route answers.
    accept: (json: any) => unknown,
  ): Promise<Answer> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    try {
      const response = await fetch(`${this.mesh.gatewayUrl}${pathname}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.attemptDeadlineMs),
      });
      const text = await response.text();
      if (response.status === 503 && response.headers.get('retry-after')) return { outcome: 'unavailable' };
      if (response.status !== status) return { outcome: 'error', detail: `${pathname} ${response.status} ${text.slice(0, 200)}` };
      const value = accept(JSON.parse(text));
      return value ? { outcome: 'ok', value } : { outcome: 'error', detail: `${pathname} ${response.status} without its fields: ${text.slice(0, 200)}` };
    } catch (err) {
      return networkFailure(err);
    }
  }

  private async publish(seq: number): Promise<Answer> {
    try {
      const response = await this.events.publishEvent(
        {
          workspaceId: this.account.workspaceId,
          type: 'agent.completed',
          data: { run: this.runTag, seq },
          idempotencyKey: `chaos-${this.runTag}-${seq}`,
        },
        { timeoutMs: this.options.attemptDeadlineMs },
      );
      return { outcome: 'ok', value: response.eventId };
    } catch (err) {
      const connect = ConnectError.from(err);
      if (connect.code === Code.Unavailable) return { outcome: 'unavailable' };
      if (connect.code === Code.DeadlineExceeded) return { outcome: 'timeout' };
      return { outcome: 'error', detail: `PublishEvent ${Code[connect.code]} ${connect.rawMessage.slice(0, 200)}` };
    }
  }
}

/** How a fetch that got no answer failed: refused (nothing was sent), timed out, or reset. */
function networkFailure(err: unknown): Answer {
  const error = err as Error & { cause?: { code?: string; message?: string } };
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return { outcome: 'timeout' };
  const code = error.cause?.code ?? '';
  if (code === 'ECONNREFUSED') return { outcome: 'refused' };
  return { outcome: 'reset', detail: `${code} ${error.cause?.message ?? error.message}`.trim() };
}
