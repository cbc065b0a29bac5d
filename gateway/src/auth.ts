import { timestampMs } from '@bufbuild/protobuf/wkt';
import { type Client, Code, ConnectError } from '@connectrpc/connect';
import type { AuthService, OrganizationService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import type { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { ApiError } from '@switchboard/runtime/api-error';
import { audit } from '@switchboard/runtime/audit';
import { catalogued, errorCatalogue, keyRefusalError } from '@switchboard/runtime/error-catalogue';
import type { Logger } from '@switchboard/runtime/log';
import { isKeyScope, type KeyScopeName } from '@switchboard/runtime/policy';
import { sha256Hex } from '@switchboard/runtime/secrets';
import { createLocalJWKSet, type JSONWebKeySet, errors as joseErrors, jwtVerify } from 'jose';
import { RevokedSessions } from './revocations.js';

/** Who is calling: a user with an access token, or an API key acting as its creator. */
export interface Principal {
  type: 'user' | 'key';
  userId: string;
  sessionId?: string;
  keyId?: string;
  /** An API key's own workspace. */
  keyWorkspaceId?: string;
  /** An API key's scopes (docs/api/keys.md#scopes): the routes it may call beyond its creator's role. */
  scopes?: KeyScopeName[];
  /** When an API key expires (ms since the epoch); absent: never. */
  expiresAt?: number;
}

export interface Workspace {
  workspaceId: string;
  role: string;
}

/** How long a resolved role is reused at most (changes drop it at once: forgetWorkspace). */
export const roleCacheMs = 2_000;
/**
 * How long the keys service's answer for an API key is reused at most: the backstop of docs/api/keys.md#revocation:
 * "a revoked key gets 401 within one second" when the key.revoked and key.updated events cannot
 * reach this gateway (NATS down). With them, a change applies within milliseconds (forgetKey).
 */
export const defaultKeyCacheMs = 1_000;
const jwksRefreshMinIntervalMs = 10_000;
/** The key set is fetched again this often, so a key identity retired stops being accepted. */
const jwksMaxAgeMs = 5 * 60_000;
const cacheLimit = 50_000;

// Every 401 gets `WWW-Authenticate: Bearer` where it is answered (rest.ts).
const unauthenticated = (headerSent: boolean) => catalogued(errorCatalogue.unauthenticated, { headerSent });

/**
 * Turns credentials into a principal and a workspace: access tokens are verified locally
 * against identity's JWKS; API keys and roles are asked of the keys and identity services.
 */
export class Authenticator {
  private keySet?: ReturnType<typeof createLocalJWKSet>;
  private keySetLoadedAt = 0;
  private keySetLoading?: Promise<void>;
  private readonly verifiedTokens = new Map<string, { principal: Principal; expiresAt: number }>();
  private readonly roles = new Map<string, { workspace: Workspace; expiresAt: number }>();
  /** By the SHA-256 of the key (the key itself is not kept): the principal, or the refusal to throw. */
  private readonly keyAnswers = new Map<string, { keyId?: string; outcome: Principal | ApiError; expiresAt: number }>();
  private readonly keyHashes = new Map<string, string>();

  constructor(
    private readonly identityAuth: Client<typeof AuthService>,
    private readonly organizations: Client<typeof OrganizationService>,
    private readonly keys: Client<typeof KeyService>,
    private readonly log: Logger,
    /** Sessions whose tokens are refused before they expire (logout, password change, …). */
    readonly revokedSessions: RevokedSessions = new RevokedSessions(),
    private readonly keyCacheMs = defaultKeyCacheMs,
  ) {}

  /** The principal of an `Authorization: Bearer …` header; 401 when absent or not valid. */
  async authenticate(authorization: string | undefined, scope: { ip?: string; requestId?: string } = {}): Promise<Principal> {
    if (!authorization) throw unauthenticated(false);
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) throw unauthenticated(true);
    const credential = match[1];
    return credential.startsWith('sb_') ? this.authenticateKey(credential, scope) : this.authenticateAccessToken(credential);
  }

  private async authenticateAccessToken(token: string): Promise<Principal> {
    const cached = this.verifiedTokens.get(token);
    let principal: Principal;
    if (cached && cached.expiresAt > Date.now()) {
      principal = cached.principal;
    } else {
      const payload = await this.verifyJwt(token);
      if (typeof payload.sub !== 'string' || typeof payload.sid !== 'string') throw catalogued(errorCatalogue.invalidToken);
      principal = { type: 'user', userId: payload.sub, sessionId: payload.sid };
      if (this.verifiedTokens.size >= cacheLimit) this.verifiedTokens.clear();
      this.verifiedTokens.set(token, { principal, expiresAt: payload.exp! * 1000 });
    }
    // Checked on every request, cached token or not: a revocation applies at once.
    if (this.revokedSessions.has(principal.sessionId!)) throw catalogued(errorCatalogue.sessionRevoked);
    return principal;
  }

  private async verifyJwt(token: string, retried = false): Promise<{ sub?: string; sid?: unknown; exp?: number }> {
    if (!this.keySet) await this.loadKeySet();
    else if (Date.now() - this.keySetLoadedAt > jwksMaxAgeMs) {
      // Retired keys stop being trusted: refresh in the background, keep serving meanwhile.
      this.loadKeySet().catch((err) => this.log.warn({ err: (err as Error).message }, 'could not refresh the JWKS; keeping the current one'));
    }
    try {
      const { payload } = await jwtVerify(token, this.keySet!, {
        issuer: 'switchboard',
        audience: 'switchboard-api',
        algorithms: ['ES256', 'EdDSA'],
        requiredClaims: ['exp', 'sub', 'sid'],
      });
      return payload;
    } catch (err) {
      if (err instanceof joseErrors.JWKSNoMatchingKey && !retried && Date.now() - this.keySetLoadedAt > jwksRefreshMinIntervalMs) {
        // A key rotation: fetch the new key set once, then try again.
        await this.loadKeySet();
        return this.verifyJwt(token, true);
      }
      if (err instanceof joseErrors.JWTExpired) throw catalogued(errorCatalogue.tokenExpired);
      throw catalogued(errorCatalogue.invalidToken);
    }
  }

  private loadKeySet(): Promise<void> {
    this.keySetLoading ??= (async () => {
      try {
        const jwks = await this.identityAuth.getJwks({}, { timeoutMs: 5000 });
        this.keySet = createLocalJWKSet({ keys: jwks.keys.map((key) => ({ ...key })) } as JSONWebKeySet);
        this.keySetLoadedAt = Date.now();
        this.log.info({ kids: jwks.keys.map((key) => key.kid) }, 'loaded the access-token JWKS');
      } finally {
        this.keySetLoading = undefined;
      }
    })();
    return this.keySetLoading;
  }

  /**
   * The principal of an API key, from the keys service (AuthenticateKey answers from memory),
   * cached for keyCacheMs: 401 unknown, revoked or expired, 402 spend_cap_exceeded with its facts.
   */
  private async authenticateKey(fullKey: string, scope: { ip?: string; requestId?: string }): Promise<Principal> {
    const hash = sha256Hex(fullKey);
    let cached = this.keyAnswers.get(hash);
    if (!cached || cached.expiresAt <= Date.now()) {
      const result = await this.keys.authenticateKey({ fullKey }, { timeoutMs: 5000, headers: requestIdHeader(scope.requestId) });
      cached = { keyId: result.keyId || undefined, outcome: keyOutcome(result), expiresAt: Date.now() + this.keyCacheMs };
      if (this.keyAnswers.size >= cacheLimit) {
        this.keyAnswers.clear();
        this.keyHashes.clear();
      }
      this.keyAnswers.set(hash, cached);
      if (cached.keyId) this.keyHashes.set(cached.keyId, hash);
    }
    const { outcome } = cached;
    // docs/api/keys.md#expiry: refused from its expires_at on by this gateway's clock, even from the
    // cache, so a key never outlives it by the cache's second.
    const refusal =
      outcome instanceof ApiError
        ? outcome
        : outcome.expiresAt !== undefined && outcome.expiresAt <= Date.now()
          ? catalogued(errorCatalogue.apiKeyExpired)
          : undefined;
    if (refusal) {
      // ASVS 16.3: a refused credential is an audit line (the key's id when it exists, never the key).
      audit(this.log, {
        event: 'authentication.api_key',
        outcome: 'failure',
        ip: scope.ip,
        requestId: scope.requestId,
        reason: refusal.code,
        details: { key_id: cached.keyId },
      });
      throw refusal;
    }
    return outcome as Principal;
  }

  /** Drops the cached answer for a key whose standing changed (revoked, cap changed or reached). */
  forgetKey(keyId: string): void {
    const hash = this.keyHashes.get(keyId);
    if (hash) this.keyAnswers.delete(hash);
  }

  /** Drops the cached roles of an organization whose memberships or roles changed. */
  forgetWorkspace(workspaceId: string): void {
    for (const [key, entry] of this.roles) if (entry.workspace.workspaceId === workspaceId) this.roles.delete(key);
  }

  /**
   * The workspace a request acts in and the principal's role there: X-Workspace-Id (a user must
   * be a member: else 404), the personal workspace by default, an API key's own workspace.
   */
  async resolveWorkspace(principal: Principal, requested: string | undefined, scope: { requestId?: string } = {}): Promise<Workspace> {
    if (principal.type === 'key' && requested && requested !== principal.keyWorkspaceId) {
      throw catalogued(errorCatalogue.workspaceMismatch);
    }
    const workspaceId = principal.type === 'key' ? principal.keyWorkspaceId! : (requested ?? '');
    const cacheKey = `${principal.userId}|${workspaceId}`;
    const cached = this.roles.get(cacheKey);
    if (cached && cached.expiresAt > Date.now()) return cached.workspace;
    let resolved: Awaited<ReturnType<typeof this.organizations.resolveWorkspace>>;
    try {
      resolved = await this.organizations.resolveWorkspace(
        { userId: principal.userId, workspaceId },
        { timeoutMs: 5000, headers: requestIdHeader(scope.requestId) },
      );
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.NotFound) {
        throw catalogued(errorCatalogue.workspaceNotFound);
      }
      throw err;
    }
    if (resolved.deactivated) throw catalogued(errorCatalogue.accountDeactivated);
    const workspace = { workspaceId: resolved.workspaceId, role: resolved.role };
    if (this.roles.size >= cacheLimit) this.roles.clear();
    this.roles.set(cacheKey, { workspace, expiresAt: Date.now() + roleCacheMs });
    return workspace;
  }
}

/** The REST request's id on the calls made to authenticate it, so the services' log lines carry it too. */
const requestIdHeader = (requestId: string | undefined): Record<string, string> => (requestId ? { 'x-request-id': requestId } : {});

function keyOutcome(result: Awaited<ReturnType<Client<typeof KeyService>['authenticateKey']>>): Principal | ApiError {
  return (
    keyRefusalError(result, 'rest') ?? {
      type: 'key',
      userId: result.createdBy,
      keyId: result.keyId,
      keyWorkspaceId: result.workspaceId,
      // A scope this build does not know grants nothing, and no scopes grant nothing (fail closed).
      scopes: result.scopes.filter(isKeyScope),
      expiresAt: result.expiresAt ? timestampMs(result.expiresAt) : undefined,
    }
  );
}
