import { meshComponents } from '@switchboard/contracts/components';
import { decodeJwt, errors as joseErrors, jwtVerify, SignJWT } from 'jose';

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
 * The one component that acts for principals: the front door, which authenticates users and API
 * keys (docs/api/internal-calls.md#mesh-tokens). A token from any other component carrying a
 * principal is refused, whatever it is signed with.
 */
export const principalCaller: string = meshComponents.find((component) => component.frontDoor)?.name ?? 'gateway';

/**
 * The keys one process holds (docs/api/internal-calls.md#mesh-keys): per component, its current key
 * and the previous ones still accepted during a rotation; a component without keys of its own
 * uses the shared SWITCHBOARD_MESH_SECRET (and the previous shared secret), as §mesh-tokens says.
 * A token from component X is verified with X's keys only: holding the data plane's key signs
 * nothing the identity service takes for the gateway.
 */
export class MeshKeyring {
  private readonly own: ReadonlyMap<string, readonly Uint8Array[]>;
  private readonly shared: readonly Uint8Array[];

  constructor(options: { components?: Iterable<readonly [string, readonly string[]]>; secret?: string; previousSecret?: string }) {
    const encode = (secret: string) => new TextEncoder().encode(secret);
    this.own = new Map([...(options.components ?? [])].filter(([, secrets]) => secrets.length > 0).map(([name, secrets]) => [name, secrets.map(encode)]));
    this.shared = [options.secret, options.previousSecret].filter((secret): secret is string => !!secret).map(encode);
  }

  /** The keys a token from `component` may be signed with, the current one first (empty: none). */
  keysOf(component: string): readonly Uint8Array[] {
    return this.own.get(component) ?? this.shared;
  }

  /** Whether this keyring can sign as `component`. */
  signs(component: string): boolean {
    return this.keysOf(component).length > 0;
  }
}

/**
 * Mints and verifies the mesh tokens of docs/api/internal-calls.md#mesh-tokens: HS256 with the
 * calling component's key (MeshKeyring). Both sides cache, because every REST request mints one
 * and every RPC verifies one.
 */
export class MeshTokens {
  private readonly keyring: MeshKeyring;
  private readonly minted = new Map<string, { token: string; exp: number }>();
  private readonly verified = new Map<string, { claims: MeshClaims; exp: number }>();

  /**
   * `keys` is a keyring, or the single shared secret; `previous`, with a single secret while a
   * new one rolls out, is accepted for verification (never for signing), so services restarted
   * with the new secret and those still on the old one keep talking.
   */
  constructor(
    keys: MeshKeyring | string,
    private readonly now: () => number = Date.now,
    previous?: string,
  ) {
    this.keyring = typeof keys === 'string' ? new MeshKeyring({ secret: keys, previousSecret: previous }) : keys;
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
      .sign(this.signingKey(claims.caller));
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
      // The claimed caller picks the keys; the signature then proves it (a token naming another
      // component than its signer's fails here).
      const keys = this.keyring.keysOf(claimedCaller(token));
      if (keys.length === 0) throw new MeshTokenError('mesh token refused (no key for its caller)');
      ({ payload } = await verifyWithAny(keys, check));
    } catch (err) {
      if (err instanceof MeshTokenError) throw err;
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
    if (claims.caller !== principalCaller && actsForPrincipal(claims))
      throw new MeshTokenError(`mesh token refused (only the ${principalCaller} acts for principals)`);
    if (this.verified.size >= cacheLimit) this.verified.clear();
    this.verified.set(cacheKey, { claims, exp: payload.exp! });
    return claims;
  }

  private signingKey(caller: string): Uint8Array {
    const key = this.keyring.keysOf(caller)[0];
    if (!key) throw new Error(`no mesh key to sign as ${caller}: set SWITCHBOARD_MESH_KEYS with an entry for it, or SWITCHBOARD_MESH_SECRET`);
    return key;
  }
}

/** The `sub` a token claims, before any check (it only picks the keys its signature is checked with). */
export function claimedCaller(token: string): string {
  try {
    const sub = decodeJwt(token).sub;
    return typeof sub === 'string' ? sub : '';
  } catch {
    return '';
  }
}

/** Tries the keys in order; only a signature mismatch moves on to the next (claims are checked the same with each). */
async function verifyWithAny<T>(keys: readonly Uint8Array[], check: (key: Uint8Array) => Promise<T>): Promise<T> {
  for (let index = 0; ; index++) {
    try {
      return await check(keys[index]);
    } catch (err) {
      if (!(index + 1 < keys.length && err instanceof joseErrors.JWSSignatureVerificationFailed)) throw err;
    }
  }
}

/** Whether claims speak for a principal or carry what only the front door sees of a client request. */
function actsForPrincipal(claims: MeshClaims): boolean {
  return Object.entries(claims).some(([name, value]) => name !== 'caller' && value !== undefined);
}

export class MeshTokenError extends Error {}

function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
