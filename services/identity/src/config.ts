import os from 'node:os';
import { servicePorts } from '@switchboard/contracts/components';
import { ConfigError, readDuration, readInt, readString, serviceUrl } from '@switchboard/runtime/config';
import { type ActionLimitsConfig, readActionLimits } from './action-limits.js';
import { minAuditRetentionMs } from './audit-log.js';
import { defaultInvitationTtl } from './invitations.js';

/**
 * The settings of the identity service (docs/operations.md), read once at start by main.ts and
 * passed down; a malformed value stops the start, naming its variable.
 */
export interface IdentityConfig {
  /** MFA_TOKEN_TTL: how long a sign-in waits for its second factor. */
  mfaTokenTtlMs: number;
  /** PASSWORD_RESET_TTL: how long a reset link stays valid. */
  passwordResetTtlMs: number;
  /** ACCOUNT_ERASE_AFTER: how long a deactivated account is kept before it is erased. */
  accountEraseAfterMs: number;
  /** INVITATION_TTL: how long an invitation stays valid (7d; tests shorten it). */
  invitationTtlMs: number;
  /** HOUSEKEEPING_INTERVAL: how often the erasure job runs and old counters and tokens are pruned. */
  housekeepingIntervalMs: number;
  /** REGISTRATIONS_PER_IP_PER_HOUR and the other action limits. */
  actionLimits: ActionLimitsConfig;
  /**
   * ARGON2_CONCURRENCY (default: the number of cores): argon2 computations at once. More than
   * the cores only add CPU contention for the event loop's thread; sign-ins beyond it queue.
   * `npm run bench:login` measures it.
   */
  argon2Concurrency: number;
  /**
   * ARGON2_QUEUE_LIMIT (default: 8 per slot, about a second of work): hashes that may wait for a
   * slot; past it a request fails at once with 503, since queueing without bound only turns a
   * storm into memory use and answers that come after their deadline.
   */
  argon2QueueLimit: number;
  /**
   * PUBLIC_BASE_URL, without a trailing slash: where users reach the gateway, so the dashboard
   * pages that mailed links open (docs/api/identity.md#mail) and the data export's link.
   */
  publicUrl: string;
  /** The data export (docs/api/identity.md#data-export): KEYS_URL and CONVERSATIONS_URL for its parts, DATA_EXPORT_INTERVAL for its worker's retries and sweep. */
  dataExport: { keysUrl: string; conversationsUrl: string; intervalMs: number };
  /** AUDIT_RETENTION (default and least 365d): how long audit records are kept before the sweeper deletes them. */
  auditRetentionMs: number;
}

export function readIdentityConfig(env: Record<string, string | undefined> = process.env): IdentityConfig {
  const argon2Concurrency = readInt('ARGON2_CONCURRENCY', Math.max(1, os.availableParallelism()), env, 1);
  return {
    mfaTokenTtlMs: readDuration('MFA_TOKEN_TTL', '5m', env),
    passwordResetTtlMs: readDuration('PASSWORD_RESET_TTL', '1h', env),
    accountEraseAfterMs: readDuration('ACCOUNT_ERASE_AFTER', '30d', env),
    invitationTtlMs: readDuration('INVITATION_TTL', defaultInvitationTtl, env),
    housekeepingIntervalMs: readDuration('HOUSEKEEPING_INTERVAL', '1h', env, 1),
    actionLimits: readActionLimits(env),
    argon2Concurrency,
    argon2QueueLimit: readInt('ARGON2_QUEUE_LIMIT', argon2Concurrency * 8, env),
    publicUrl: readPublicUrl(env),
    dataExport: {
      keysUrl: serviceUrl('keys', servicePorts.keys, env),
      conversationsUrl: serviceUrl('conversations', servicePorts.conversations, env),
      intervalMs: readDuration('DATA_EXPORT_INTERVAL', '10s', env, 100),
    },
    auditRetentionMs: readAuditRetention(env),
  };
}

/**
 * PUBLIC_BASE_URL: an http(s) URL; mailed links are built on it, so a typo fails the start, not a
 * mail. In production it must be set and https: the links carry tokens, and a default naming
 * localhost would mail links that lead nowhere (docs/operations.md#running-in-production).
 */
function readPublicUrl(env: Record<string, string | undefined>): string {
  const production = env.NODE_ENV === 'production';
  if (production && !env.PUBLIC_BASE_URL) throw new ConfigError('PUBLIC_BASE_URL is required when NODE_ENV=production (mailed links point there)');
  const value = readString('PUBLIC_BASE_URL', 'http://localhost:8080', env).replace(/\/+$/, '');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`PUBLIC_BASE_URL is not a URL: "${value}"`);
  }
  if (url.protocol !== 'https:' && (production || url.protocol !== 'http:')) {
    throw new ConfigError('PUBLIC_BASE_URL must start with https:// (http:// outside production only)');
  }
  return value;
}

/** AUDIT_RETENTION: a duration of at least 365 days (records are kept at least a year: docs/api/audit.md#retention). */
function readAuditRetention(env: Record<string, string | undefined>): number {
  const ms = readDuration('AUDIT_RETENTION', '365d', env);
  if (ms < minAuditRetentionMs)
    throw new ConfigError(`AUDIT_RETENTION must be at least 365d (audit records are kept at least a year), got "${env.AUDIT_RETENTION}"`);
  return ms;
}
