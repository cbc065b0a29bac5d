import type { ConnectError } from '@connectrpc/connect';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import { ConfigError, readInt } from '@switchboard/runtime/config';
import type { Knex } from '@switchboard/runtime/db';
import { retryLater } from '@switchboard/runtime/errors';
import { throttleKeyOfIp } from '@switchboard/runtime/ip';
import { deleteAttempts, insertAttempts, recentAttempts } from './store/auth-failures.js';

/**
 * Rate limits of expensive or abusable actions that no failure counter covers (ASVS 2.4): every
 * registration hashes a password and mails, every invitation mails a stranger. Each action is
 * counted per subject (the client IP, or the acting user) over a sliding hour, in Postgres so
 * all replicas share it, the same way the sign-in throttle counts: the attempt is written first,
 * then the count read, so a concurrent burst cannot pass the limit; a refused attempt is deleted.
 */

export type LimitedAction = 'registration' | 'organization_create' | 'invitation' | 'data_export' | 'verification_resend';
type Scope = 'ip' | 'user';

const windowMs = 3600 * 1000;

/**
 * Per hour; the variables that set each limit, and their defaults. The per-address defaults let
 * a 100-person office behind one address (one NAT) sign up, make its organizations, be invited
 * and ask for mails again within an hour, with room for retries, while one address still cannot
 * flood (docs/operations.md#identity-accounts-organizations-mail has the reasoning).
 */
const settings: Record<LimitedAction, Array<{ scope: Scope; variable: string; fallback: number }>> = {
  registration: [{ scope: 'ip', variable: 'REGISTRATIONS_PER_IP_PER_HOUR', fallback: 200 }],
  organization_create: [
    { scope: 'user', variable: 'ORGANIZATIONS_PER_USER_PER_HOUR', fallback: 20 },
    { scope: 'ip', variable: 'ORGANIZATIONS_PER_IP_PER_HOUR', fallback: 200 },
  ],
  invitation: [
    { scope: 'user', variable: 'INVITATIONS_PER_USER_PER_HOUR', fallback: 200 },
    { scope: 'ip', variable: 'INVITATIONS_PER_IP_PER_HOUR', fallback: 300 },
  ],
  // Each mailbox gets at most 3 verification mails in 15 minutes anyway; this bounds the work
  // and the mail one address can cause across many accounts.
  verification_resend: [{ scope: 'ip', variable: 'VERIFICATION_RESENDS_PER_IP_PER_HOUR', fallback: 300 }],
  // Each export is a large document kept 7 days and heavy reads in keys and conversations.
  data_export: [{ scope: 'user', variable: 'DATA_EXPORTS_PER_USER_PER_HOUR', fallback: 3 }],
};

export type ActionLimitsConfig = Record<LimitedAction, Array<{ scope: Scope; limit: number }>>;

/** The limits from the environment (each ≥ 1). */
export function readActionLimits(env: Record<string, string | undefined>): ActionLimitsConfig {
  const config = {} as ActionLimitsConfig;
  for (const [action, limits] of Object.entries(settings) as Array<[LimitedAction, (typeof settings)[LimitedAction]]>) {
    config[action] = limits.map(({ scope, variable, fallback }) => {
      const limit = readInt(variable, fallback, env);
      if (limit < 1) throw new ConfigError(`${variable} must be at least 1`);
      return { scope, limit };
    });
  }
  return config;
}

export class ActionLimits {
  constructor(private readonly deps: { db: Knex; limits: ActionLimitsConfig; clock?: Clock }) {}

  /**
   * Counts one `action` by these subjects, or refuses it with 429 `rate_limited` and Retry-After
   * when a limit is reached. A subject that is unknown (no client IP) is not counted.
   */
  async take(action: LimitedAction, subjects: { ip?: string; userId?: string }): Promise<void> {
    const { db, limits } = this.deps;
    const now = (this.deps.clock ?? systemClock)();
    const keyed = limits[action]
      .map(({ scope, limit }) => ({ scope, limit, subject: scope === 'ip' ? subjects.ip && throttleKeyOfIp(subjects.ip) : subjects.userId }))
      .filter((entry): entry is { scope: Scope; limit: number; subject: string } => Boolean(entry.subject));
    const ids = await insertAttempts(db, action, keyed, now);
    const recent = await recentAttempts(db, action, keyed, new Date(now.getTime() - windowMs), ids, now);
    let retryAt = 0;
    for (const { scope, limit } of keyed) {
      // Oldest first; at the limit, this attempt may go when the oldest leaves the hour.
      const earlier = recent.get(scope) ?? [];
      if (earlier.length >= limit) retryAt = Math.max(retryAt, earlier[0].getTime() + windowMs);
    }
    if (retryAt > now.getTime()) {
      await deleteAttempts(db, { ids });
      throw rateLimited(action, Math.max(1, Math.ceil((retryAt - now.getTime()) / 1000)));
    }
  }
}

const what: Record<LimitedAction, string> = {
  registration: 'accounts registered from this address',
  organization_create: 'organizations created',
  invitation: 'invitations sent',
  data_export: 'data exports requested',
  verification_resend: 'verification mails requested from this address',
};

function rateLimited(action: LimitedAction, retryAfterSeconds: number): ConnectError {
  return retryLater('rate_limited', `Too many ${what[action]} in the last hour; try again in ${retryAfterSeconds} seconds.`, retryAfterSeconds);
}
