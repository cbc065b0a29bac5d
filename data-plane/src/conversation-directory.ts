import type { Client } from '@connectrpc/connect';
import type { ExchangeService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';

/**
 * Which workspace a conversation belongs to, for the check of X-Service-Conversation-Id before
 * the upstream is called (docs/money-path.md#conversation-appends). A conversation never changes
 * workspace, so a yes is remembered for `ttlMs` and the steady state makes no call; a no is never
 * remembered (the conversation may be created a moment later), nor is anything once `ttlMs` has
 * passed (it may have been deleted: the exchange of a request let through by a remembered yes is
 * then dropped by the conversations service, as if it had been deleted a moment later).
 */

export interface ConversationDirectoryDeps {
  exchanges: Client<typeof ExchangeService>;
  /** How long a yes is remembered (default 60 s). */
  ttlMs?: number;
  /** Conversations remembered at most, the least recently checked forgotten first (default 10,000). */
  maxEntries?: number;
  /** The deadline of the check's call (default 5 s): one that misses it fails the request (503). */
  timeoutMs?: number;
  clock?: Clock;
}

export class ConversationDirectory {
  /** Conversation id → its workspace and when that yes expires; a Map iterates oldest first, which makes it an LRU. */
  private readonly known = new Map<string, { workspaceId: string; expiresAt: number }>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly clock: Clock;

  constructor(private readonly deps: ConversationDirectoryDeps) {
    this.ttlMs = deps.ttlMs ?? 60_000;
    this.maxEntries = deps.maxEntries ?? 10_000;
    this.clock = deps.clock ?? systemClock;
  }

  /**
   * Resolves when the workspace can see the conversation; otherwise rejects with the
   * conversations service's refusal (not_found, conversation_not_found: a 404 at the front door)
   * or its outage.
   */
  async check(workspaceId: string, conversationId: string): Promise<void> {
    const now = this.clock().getTime();
    const entry = this.known.get(conversationId);
    if (entry && entry.workspaceId === workspaceId && entry.expiresAt > now) {
      this.known.delete(conversationId);
      this.known.set(conversationId, entry);
      return;
    }
    // An exchange without messages is only the visibility check.
    await this.deps.exchanges.appendExchange({ workspaceId, conversationId, messages: [] }, { timeoutMs: this.deps.timeoutMs ?? 5000 });
    this.known.delete(conversationId);
    this.known.set(conversationId, { workspaceId, expiresAt: now + this.ttlMs });
    if (this.known.size > this.maxEntries) this.known.delete(this.known.keys().next().value!);
  }
}
