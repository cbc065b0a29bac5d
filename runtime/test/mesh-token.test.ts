import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { type MeshClaims, MeshKeyring, MeshTokenError, MeshTokens } from '../src/mesh-token.js';

const secret = 'a-mesh-secret-of-at-least-32-bytes!!';
const key = new TextEncoder().encode(secret);
/** A whole second, so floor(now / 1000) arithmetic in the tests is exact. */
const t0 = 1_700_000_000_000;

/** A clock the test moves by hand. */
function clock(start = t0) {
  let now = start;
  return {
    now: () => now,
    set: (ms: number) => (now = ms),
    advance: (ms: number) => (now += ms),
  };
}

const fullClaims: MeshClaims = {
  caller: 'gateway',
  principalId: 'usr_123',
  principalType: 'user',
  workspaceId: 'org_456',
  role: 'admin',
  sessionId: 'ses_789',
};

async function refused(promise: Promise<unknown>): Promise<MeshTokenError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'the token was accepted').toBeInstanceOf(MeshTokenError);
  return err as MeshTokenError;
}

/** A token signed by hand with the mesh secret (or another), for forgeries the minter never makes. */
function handMade(payload: Record<string, unknown>, options: { alg?: string; key?: Uint8Array } = {}) {
  return new SignJWT(payload).setProtectedHeader({ alg: options.alg ?? 'HS256', typ: 'JWT' }).sign(options.key ?? key);
}

/** Claims as verify returns them: every key present. */
const normalized = (claims: MeshClaims): MeshClaims => ({
  caller: claims.caller,
  principalId: claims.principalId,
  principalType: claims.principalType,
  workspaceId: claims.workspaceId,
  role: claims.role,
  sessionId: claims.sessionId,
  keyId: claims.keyId,
});

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('MeshTokens.mint', () => {
  it('mints an HS256 JWT with iss, sub, aud, iat and exp ≤ 5 minutes ahead (docs/api/internal-calls.md#mesh-tokens)', async () => {
    const c = clock();
    const token = await new MeshTokens(secret, c.now).mint('identity', fullClaims);
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: 'HS256' });
    const payload = decodeJwt(token);
    expect(payload).toMatchObject({
      iss: 'switchboard',
      sub: 'gateway',
      aud: 'identity',
      principal_id: 'usr_123',
      principal_type: 'user',
      workspace_id: 'org_456',
      role: 'admin',
      sid: 'ses_789',
      iat: t0 / 1000,
    });
    expect(payload.exp! - t0 / 1000).toBeGreaterThan(0);
    expect(payload.exp! - t0 / 1000).toBeLessThanOrEqual(300);
  });

  it('leaves out the claims it was not given', async () => {
    const token = await new MeshTokens(secret, clock().now).mint('keys', { caller: 'data-plane' });
    const payload = decodeJwt(token);
    expect(Object.keys(payload).sort()).toEqual(['aud', 'exp', 'iat', 'iss', 'sub']);
  });

  it('reuses a token while more than 60 s remain, then mints a new one', async () => {
    const c = clock();
    const tokens = new MeshTokens(secret, c.now);
    const first = await tokens.mint('identity', fullClaims);
    c.advance(1_000);
    expect(await tokens.mint('identity', fullClaims)).toBe(first);
    c.set(t0 + 239_999); // 61 s (rounded down) left
    expect(await tokens.mint('identity', fullClaims)).toBe(first);
    c.set(t0 + 240_000); // exactly 60 s left: no longer reused
    const second = await tokens.mint('identity', fullClaims);
    expect(second).not.toBe(first);
    expect(decodeJwt(second).exp).toBe((t0 + 240_000) / 1000 + 300);
    // The new token is the one reused from now on.
    c.advance(100_000);
    expect(await tokens.mint('identity', fullClaims)).toBe(second);
  });

  it('never hands out a cached token minted for another audience or other claims', async () => {
    const c = clock();
    const tokens = new MeshTokens(secret, c.now);
    const forIdentity = await tokens.mint('identity', fullClaims);
    const variants: Array<[string, MeshClaims]> = [
      ['keys', fullClaims],
      ['identity', { caller: 'billing' }],
      ['identity', { ...fullClaims, principalId: 'usr_other' }],
      ['identity', { ...fullClaims, principalType: 'key', keyId: 'key_1', sessionId: undefined }],
      ['identity', { ...fullClaims, workspaceId: 'org_other' }],
      ['identity', { ...fullClaims, role: 'member' }],
      ['identity', { ...fullClaims, sessionId: 'ses_other' }],
      ['identity', { caller: 'gateway' }],
    ];
    const seen = new Set([forIdentity]);
    for (const [audience, claims] of variants) {
      const token = await tokens.mint(audience, claims);
      expect(seen.has(token), `${audience} ${JSON.stringify(claims)}`).toBe(false);
      seen.add(token);
      expect(await tokens.verify(token, audience)).toEqual(normalized(claims));
    }
  });
});

describe('MeshTokens.verify', () => {
  it('round-trips the claims', async () => {
    const c = clock();
    const tokens = new MeshTokens(secret, c.now);
    const claims: MeshClaims = { caller: 'gateway', principalId: 'usr_1', principalType: 'key', workspaceId: 'org_1', role: 'member', keyId: 'key_1' };
    const verifier = new MeshTokens(secret, c.now);
    expect(await verifier.verify(await tokens.mint('billing', claims), 'billing')).toEqual(normalized(claims));
    expect(await verifier.verify(await tokens.mint('billing', fullClaims), 'billing')).toEqual(normalized(fullClaims));
    expect(await verifier.verify(await tokens.mint('billing', { caller: 'data-plane' }), 'billing')).toEqual(normalized({ caller: 'data-plane' }));
  });

  it('refuses a token for another audience', async () => {
    const c = clock();
    const token = await new MeshTokens(secret, c.now).mint('keys', fullClaims);
    await refused(new MeshTokens(secret, c.now).verify(token, 'identity'));
  });

  it('refuses a token for another audience even after accepting it for its own', async () => {
    const c = clock();
    const token = await new MeshTokens(secret, c.now).mint('keys', fullClaims);
    const verifier = new MeshTokens(secret, c.now);
    await verifier.verify(token, 'keys');
    await refused(verifier.verify(token, 'identity'));
  });

  it('refuses a token signed with another secret', async () => {
    const c = clock();
    const token = await new MeshTokens('another-secret-of-at-least-32-bytes!', c.now).mint('identity', fullClaims);
    await refused(new MeshTokens(secret, c.now).verify(token, 'identity'));
  });

  it('accepts tokens of the previous secret while it is configured, and always signs with the new one', async () => {
    const c = clock();
    const previous = 'the-previous-secret-of-32-bytes-or-more';
    const oldToken = await new MeshTokens(previous, c.now).mint('identity', fullClaims);
    const rolling = new MeshTokens(secret, c.now, previous);
    expect(await rolling.verify(oldToken, 'identity')).toEqual(fullClaims);
    // What it mints verifies with the new secret alone.
    const newToken = await rolling.mint('identity', fullClaims);
    expect(await new MeshTokens(secret, c.now).verify(newToken, 'identity')).toEqual(fullClaims);
    await refused(new MeshTokens(previous, c.now).verify(newToken, 'identity'));
    // The previous secret passes the signature only: audience and expiry are checked the same.
    await refused(rolling.verify(oldToken, 'keys'));
    await refused(new MeshTokens(secret, c.now).verify(oldToken, 'identity'));
  });

  it('refuses a token once expired, even one it accepted and cached before', async () => {
    const c = clock();
    const tokens = new MeshTokens(secret, c.now);
    const token = await tokens.mint('identity', fullClaims);
    const verifier = new MeshTokens(secret, c.now);
    c.advance(299_000);
    expect((await verifier.verify(token, 'identity')).caller).toBe('gateway');
    c.advance(1_000 + 60_000); // past exp and the minute of tolerated clock difference
    await refused(verifier.verify(token, 'identity'));
    // A fresh verifier (no cache) agrees.
    await refused(new MeshTokens(secret, c.now).verify(token, 'identity'));
  });

  it('tolerates a minute of clock difference between the minting and the verifying host', async () => {
    const ahead = new MeshTokens(secret, () => t0 + 30_000);
    const token = await ahead.mint('identity', { caller: 'gateway' });
    expect((await new MeshTokens(secret, clock().now).verify(token, 'identity')).caller).toBe('gateway');
  });

  it('refuses a token from the future that lives longer than 5 minutes', async () => {
    const now = t0 / 1000;
    const token = await handMade({ iss: 'switchboard', sub: 'gateway', aud: 'identity', iat: now, exp: now + 3600 });
    const err = await refused(new MeshTokens(secret, clock().now).verify(token, 'identity'));
    expect(err.message).toMatch(/too long/);
    // 300 s (what mint gives) is fine.
    const ok = await handMade({ iss: 'switchboard', sub: 'gateway', aud: 'identity', iat: now, exp: now + 300 });
    expect((await new MeshTokens(secret, clock().now).verify(ok, 'identity')).caller).toBe('gateway');
  });

  it('refuses alg "none" and HS512 tokens, wrong issuer, and missing sub or exp', async () => {
    const now = t0 / 1000;
    const good = { iss: 'switchboard', sub: 'gateway', aud: 'identity', iat: now, exp: now + 120 };
    const verifier = new MeshTokens(secret, clock().now);
    // Sanity: the hand-made good token is accepted, so the refusals below are for the stated reason.
    expect((await verifier.verify(await handMade(good), 'identity')).caller).toBe('gateway');

    const unsigned = `${b64({ alg: 'none', typ: 'JWT' })}.${b64(good)}.`;
    await refused(verifier.verify(unsigned, 'identity'));
    // "none" header over a valid HS256 signature of the same payload.
    const validSig = (await handMade(good)).split('.')[2];
    await refused(verifier.verify(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(good)}.${validSig}`, 'identity'));
    await refused(verifier.verify(await handMade(good, { alg: 'HS512' }), 'identity'));
    await refused(verifier.verify(await handMade(good, { alg: 'HS384' }), 'identity'));
    await refused(verifier.verify(await handMade({ ...good, iss: 'someone-else' }), 'identity'));
    const { sub: _sub, ...noSub } = good;
    await refused(verifier.verify(await handMade(noSub), 'identity'));
    const { exp: _exp, ...noExp } = good;
    await refused(verifier.verify(await handMade(noExp), 'identity'));
  });

  it('refuses garbage and tampered tokens', async () => {
    const c = clock();
    const verifier = new MeshTokens(secret, c.now);
    for (const garbage of ['', 'abc', 'a.b.c', 'Bearer x']) await refused(verifier.verify(garbage, 'identity'));
    const token = await new MeshTokens(secret, c.now).mint('identity', { caller: 'gateway', role: 'member' });
    const [header, , signature] = token.split('.');
    const escalated = b64({ ...decodeJwt(token), role: 'owner' });
    await refused(verifier.verify(`${header}.${escalated}.${signature}`, 'identity'));
  });

  it('ignores claims of the wrong type instead of trusting them', async () => {
    const now = t0 / 1000;
    const token = await handMade({
      iss: 'switchboard',
      sub: 'gateway',
      aud: 'identity',
      exp: now + 60,
      principal_id: 42,
      principal_type: 'admin',
      workspace_id: '',
      role: ['owner'],
    });
    expect(await new MeshTokens(secret, clock().now).verify(token, 'identity')).toMatchObject({
      caller: 'gateway',
      principalId: undefined,
      principalType: undefined,
      workspaceId: undefined,
      role: undefined,
    });
  });
});

describe('per-component keys (docs/api/internal-calls.md#mesh-keys)', () => {
  const keyOf = {
    gateway: 'the-gateway-key-of-at-least-32-bytes!',
    dataPlane: 'the-data-plane-key-of-at-least-32-bytes',
    next: 'the-next-data-plane-key-of-32-bytes-or-more',
  };
  /** What identity holds in the per-component mode: its callers' keys, never a shared secret. */
  const identityKeyring = (dataPlane: string[] = [keyOf.dataPlane]) =>
    new MeshKeyring({
      components: [
        ['gateway', [keyOf.gateway]],
        ['data-plane', dataPlane],
      ],
    });
  const dataPlaneTokens = (key = keyOf.dataPlane, c = clock()) => new MeshTokens(new MeshKeyring({ components: [['data-plane', [key]]] }), c.now);

  it("verifies a token with the key of the component it names, so the data plane's key cannot claim the gateway", async () => {
    const c = clock();
    const verifier = new MeshTokens(identityKeyring(), c.now);
    expect(await verifier.verify(await dataPlaneTokens(keyOf.dataPlane, c).mint('identity', { caller: 'data-plane' }), 'identity')).toEqual(
      normalized({ caller: 'data-plane' }),
    );
    // Signed with the data plane's key, claiming the gateway: refused (and by hand, since the minter signs with the caller's own key).
    const now = t0 / 1000;
    const forged = await handMade({ iss: 'switchboard', sub: 'gateway', aud: 'identity', exp: now + 60 }, { key: new TextEncoder().encode(keyOf.dataPlane) });
    await refused(verifier.verify(forged, 'identity'));
    // A caller without keys here (another service, no shared secret): refused.
    const keysService = new MeshTokens(new MeshKeyring({ components: [['keys', ['the-keys-service-key-of-32-bytes-or-more']]] }), c.now);
    expect((await refused(verifier.verify(await keysService.mint('identity', { caller: 'keys' }), 'identity'))).message).toMatch(/no key/);
    // The gateway's own key works for the gateway.
    const gateway = new MeshTokens(new MeshKeyring({ components: [['gateway', [keyOf.gateway]]] }), c.now);
    expect(await verifier.verify(await gateway.mint('identity', fullClaims), 'identity')).toEqual(fullClaims);
  });

  it('refuses a principal, a role or any request claim from any caller but the gateway, even signed with the right key', async () => {
    const c = clock();
    const verifier = new MeshTokens(identityKeyring(), c.now);
    const dataPlane = dataPlaneTokens(keyOf.dataPlane, c);
    for (const claims of [
      { principalId: 'usr_1' },
      { workspaceId: 'org_1', role: 'owner' },
      { keyId: 'key_1' },
      { scopes: ['manage'] },
      { clientIp: '10.0.0.1' },
    ]) {
      const err = await refused(verifier.verify(await dataPlane.mint('identity', { caller: 'data-plane', ...claims }), 'identity'));
      expect(err.message).toMatch(/only the gateway acts for principals/);
    }
    // Also in the single-secret mode, where every component holds the same key.
    const single = new MeshTokens(secret, c.now);
    await refused(single.verify(await single.mint('identity', { caller: 'data-plane', principalId: 'usr_1' }), 'identity'));
  });

  it('accepts the previous key of a component during its rotation, signs with the new one, and keeps the others unchanged', async () => {
    const c = clock();
    const oldToken = await dataPlaneTokens(keyOf.dataPlane, c).mint('identity', { caller: 'data-plane' });
    // Step 1: the verifiers learn the next key, the current kept; tokens of either pass.
    const rolling = new MeshTokens(identityKeyring([keyOf.next, keyOf.dataPlane]), c.now);
    const newToken = await dataPlaneTokens(keyOf.next, c).mint('identity', { caller: 'data-plane' });
    expect((await rolling.verify(oldToken, 'identity')).caller).toBe('data-plane');
    expect((await rolling.verify(newToken, 'identity')).caller).toBe('data-plane');
    // A component that rolled signs with its first key.
    const rolled = new MeshTokens(new MeshKeyring({ components: [['data-plane', [keyOf.next, keyOf.dataPlane]]] }), c.now);
    expect(
      (await new MeshTokens(identityKeyring([keyOf.next]), c.now).verify(await rolled.mint('identity', { caller: 'data-plane' }), 'identity')).caller,
    ).toBe('data-plane');
    // Step 2: the old key dropped: its tokens are refused.
    await refused(new MeshTokens(identityKeyring([keyOf.next]), c.now).verify(oldToken, 'identity'));
  });

  it('uses the shared secret for components without keys of their own, never for those with', async () => {
    const c = clock();
    const mixed = new MeshTokens(new MeshKeyring({ components: [['gateway', [keyOf.gateway]]], secret }), c.now);
    const single = new MeshTokens(secret, c.now);
    // A data plane still on the shared secret (an external one of docs/api/internal-calls.md) keeps working…
    expect((await mixed.verify(await single.mint('keys', { caller: 'data-plane' }), 'keys')).caller).toBe('data-plane');
    // …but the shared secret no longer speaks for the gateway once it has its own key.
    await refused(mixed.verify(await single.mint('keys', fullClaims), 'keys'));
  });
});
