import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';

/** What a service knows about the caller of an internal RPC (docs/api/internal-calls.md#mesh-tokens). */
export interface MeshClaims {
  /** The calling component: gateway, data-plane or a service name. */
  caller: string;
  /** The principal the call is made for, if any: a user id. */
  principalId?: string;
  /** "user" (access token) or "key" (API key acting as its creator). */
  principalType?: 'user' | 'key';
  workspaceId?: string;
  role?: string;
  /** The user's session (access tokens only). */
  sessionId?: string;
  /** The API key used (API keys only). */
  keyId?: string;
  /** The API key's scopes (API keys only; docs/api/keys.md#scopes): what the call may do beyond the creator's role. */
  scopes?: string[];
  /** The client address the gateway saw (for per-IP throttling); absent for internal callers. */
  clientIp?: string;
  /** The client's User-Agent, bounded (userAgentLimit), on calls to identity: where a session was opened. */
  userAgent?: string;
}

/** Characters of a User-Agent a mesh token carries: enough to name a browser, never a large token. */
export const userAgentLimit = 256;

const issuer = 'switchboard';
const lifetimeSeconds = 300;
/** Reuse a minted token while it has at least this long to live. */
const reuseMarginSeconds = 60;
const cacheLimit = 10_000;
/** Clock difference tolerated between the minting and the verifying host. */
const clockSkewSeconds = 60;

/**
 * Mints and verifies the mesh tokens of docs/api/internal-calls.md#mesh-tokens: HS256 over SWITCHBOARD_MESH_SECRET. Both sides
 * cache, because every REST request mints one and every RPC verifies one.
 */
export class MeshTokens {
  private readonly key: Uint8Array;
  private readonly previousKey?: Uint8Array;
  private readonly minted = new Map<string, { token: string; exp: number }>();
  private readonly verified = new Map<string, { claims: MeshClaims; exp: number }>();

  /**
   * `previous`, while a new secret rolls out, is accepted for verification (never for signing),
   * so services restarted with the new secret and those still on the old one keep talking.
   */
  constructor(
    secret: string,
    private readonly now: () => number = Date.now,
    previous?: string,
  ) {
    this.key = new TextEncoder().encode(secret);
    if (previous) this.previousKey = new TextEncoder().encode(previous);
  }

  async mint(audience: string, claims: MeshClaims): Promise<string> {
    const cacheKey = JSON.stringify([
      audience,
      claims.caller,
      claims.principalType,
      claims.principalId,
      claims.workspaceId,
      claims.role,
      claims.sessionId,
      claims.keyId,
      claims.scopes?.join(' '),
      claims.clientIp,
      claims.userAgent,
    ]);
    const nowSeconds = Math.floor(this.now() / 1000);
    const cached = this.minted.get(cacheKey);
    if (cached && cached.exp - nowSeconds > reuseMarginSeconds) return cached.token;
    const exp = nowSeconds + lifetimeSeconds;
    const payload: Record<string, string> = {};
    if (claims.principalId) payload.principal_id = claims.principalId;
    if (claims.principalType) payload.principal_type = claims.principalType;
    if (claims.workspaceId) payload.workspace_id = claims.workspaceId;
    if (claims.role) payload.role = claims.role;
    if (claims.sessionId) payload.sid = claims.sessionId;
    if (claims.keyId) payload.key_id = claims.keyId;
    if (claims.scopes) payload.scope = claims.scopes.join(' ');
    if (claims.clientIp) payload.client_ip = claims.clientIp;
    if (claims.userAgent) payload.user_agent = claims.userAgent.slice(0, userAgentLimit);
    const token = await new SignJWT(payload)
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(issuer)
      .setSubject(claims.caller)
      .setAudience(audience)
      .setIssuedAt(nowSeconds)
      .setExpirationTime(exp)
      .sign(this.key);
    if (this.minted.size >= cacheLimit) this.minted.clear();
    this.minted.set(cacheKey, { token, exp });
    return token;
  }

  /** The claims of a token for `audience` verified before and still valid, without any work. */
  verifiedBefore(token: string, audience: string): MeshClaims | undefined {
    const cached = this.verified.get(`${audience} ${token}`);
    return cached && cached.exp > Math.floor(this.now() / 1000) ? cached.claims : undefined;
  }

  /** Verifies a token meant for `audience`; throws MeshTokenError when it is not acceptable. */
  async verify(token: string, audience: string): Promise<MeshClaims> {
    const nowSeconds = Math.floor(this.now() / 1000);
    const cacheKey = `${audience} ${token}`;
    const cached = this.verified.get(cacheKey);
    if (cached && cached.exp > nowSeconds) return cached.claims;
    let payload: Awaited<ReturnType<typeof jwtVerify>>['payload'];
    const check = (key: Uint8Array) =>
      jwtVerify(token, key, {
        algorithms: ['HS256'],
        issuer,
        audience,
        requiredClaims: ['exp', 'sub'],
        currentDate: new Date(nowSeconds * 1000),
        clockTolerance: clockSkewSeconds,
      });
    try {
      try {
        ({ payload } = await check(this.key));
      } catch (err) {
        // Only a signature made with the previous secret may pass; claims are checked the same.
        if (!(this.previousKey && err instanceof joseErrors.JWSSignatureVerificationFailed)) throw err;
        ({ payload } = await check(this.previousKey));
      }
    } catch (err) {
      const reason = err instanceof joseErrors.JOSEError ? err.code : 'ERR_INVALID';
      throw new MeshTokenError(`mesh token refused (${reason})`);
    }
    if (payload.exp! - nowSeconds > lifetimeSeconds + clockSkewSeconds) throw new MeshTokenError('mesh token lives too long');
    const claims: MeshClaims = {
      caller: payload.sub!,
      principalId: optionalString(payload.principal_id),
      principalType: payload.principal_type === 'user' || payload.principal_type === 'key' ? payload.principal_type : undefined,
      workspaceId: optionalString(payload.workspace_id),
      role: optionalString(payload.role),
      sessionId: optionalString(payload.sid),
      keyId: optionalString(payload.key_id),
      scopes: typeof payload.scope === 'string' ? payload.scope.split(' ').filter((scope) => scope !== '') : undefined,
      clientIp: optionalString(payload.client_ip),
      userAgent: optionalString(payload.user_agent)?.slice(0, userAgentLimit),
    };
    if (this.verified.size >= cacheLimit) this.verified.clear();
    this.verified.set(cacheKey, { claims, exp: payload.exp! });
    return claims;
  }
}

export class MeshTokenError extends Error {}

function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
