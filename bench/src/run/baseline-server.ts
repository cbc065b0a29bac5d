/**
 * The single-process baseline: one fastify server doing what the gateway and identity do
 * together for GET /v1/account, without the mesh in between. It runs as its own child process
 * (like the gateway) so it gets its own share of the cores instead of competing with the
 * load generator's event loop. Started by baseline-process.ts, which passes:
 *
 *   BASELINE_DATABASE_URL  the mesh's database (identity's tables are in schema "identity")
 *   BASELINE_JWKS_URL      the mesh's GET /v1/.well-known/jwks.json, fetched once at start
 *   BASELINE_POOL_MAX      pg pool size (identity's knex pool is 10)
 *
 * and reports {type: 'ready', port} over IPC once it listens on 127.0.0.1.
 *
 * Routes:
 *   GET /v1/account              the token verification is cached per token until it expires,
 *                                exactly like the gateway's Authenticator: the same work.
 *   GET /verify-each/v1/account  jose verifies the ES256 signature on every request.
 *
 * Both then run one indexed SELECT: the users row by primary key, joined to the membership in
 * the personal workspace. That is identity's findUserById (GetAccount) and findMembership
 * (the gateway's ResolveWorkspace, which the gateway caches for 2 s) in one statement.
 */
import { randomUUID } from 'node:crypto';
import fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { createLocalJWKSet, type JSONWebKeySet, jwtVerify } from 'jose';
import pg from 'pg';

const databaseUrl = requiredEnv('BASELINE_DATABASE_URL');
const jwksUrl = requiredEnv('BASELINE_JWKS_URL');
const poolMax = Number(process.env.BASELINE_POOL_MAX ?? 10);

function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

interface AccountRow {
  id: string;
  email: string;
  email_verified_at: Date | null;
  full_name: string | null;
  two_factor_enabled: boolean;
  personal_workspace_id: string;
  created_at: Date;
  deactivated_at: Date | null;
  role: string;
}

const accountQuery = `
  SELECT u.id, u.email, u.email_verified_at, u.full_name, u.two_factor_enabled, u.personal_workspace_id,
         u.created_at, u.deactivated_at, m.role
    FROM identity.users u
    JOIN identity.memberships m ON m.user_id = u.id AND m.org_id = u.personal_workspace_id
   WHERE u.id = $1`;

/** The gateway's checks (gateway/src/auth.ts). */
const verifyOptions = {
  issuer: 'switchboard',
  audience: 'switchboard-api',
  algorithms: ['ES256', 'EdDSA'],
  requiredClaims: ['exp', 'sub', 'sid'],
};
const cacheLimit = 50_000;

const unauthenticated = (reply: FastifyReply, code: string) =>
  reply
    .code(401)
    .header('WWW-Authenticate', 'Bearer')
    .send({ error: { code, message: 'The access token is not valid.' } });

async function verify(token: string, keySet: ReturnType<typeof createLocalJWKSet>): Promise<{ userId: string; exp: number } | undefined> {
  try {
    const { payload } = await jwtVerify(token, keySet, verifyOptions);
    if (typeof payload.sub !== 'string' || typeof payload.sid !== 'string') return undefined;
    return { userId: payload.sub, exp: payload.exp! };
  } catch {
    return undefined;
  }
}

/** GET /v1/account as identity answers it; `cached`: with the token check cached like the gateway's, else verified each time. */
function accountRoute(pool: pg.Pool, keySet: ReturnType<typeof createLocalJWKSet>) {
  const verified = new Map<string, { userId: string; expiresAt: number }>();
  return (cached: boolean) => async (request: FastifyRequest, reply: FastifyReply) => {
    reply.header('X-Request-Id', randomUUID());
    const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
    if (!match) return unauthenticated(reply, 'unauthenticated');
    const token = match[1];
    let userId: string | undefined;
    const hit = cached ? verified.get(token) : undefined;
    if (hit && hit.expiresAt > Date.now()) {
      userId = hit.userId;
    } else {
      const result = await verify(token, keySet);
      if (!result) return unauthenticated(reply, 'invalid_token');
      userId = result.userId;
      if (cached) {
        if (verified.size >= cacheLimit) verified.clear();
        verified.set(token, { userId, expiresAt: result.exp * 1000 });
      }
    }
    const { rows } = await pool.query<AccountRow>(accountQuery, [userId]);
    const row = rows[0];
    if (!row) return reply.code(404).send({ error: { code: 'workspace_not_found', message: 'No such workspace, or you are not a member of it.' } });
    if (row.deactivated_at) return unauthenticated(reply, 'account_deactivated');
    reply.header('Cache-Control', 'no-store');
    return {
      user_id: row.id,
      email: row.email,
      email_verified: row.email_verified_at !== null,
      full_name: row.full_name,
      two_factor_enabled: row.two_factor_enabled,
      personal_workspace_id: row.personal_workspace_id,
      created_at: row.created_at.toISOString(),
    };
  };
}

async function main() {
  const response = await fetch(jwksUrl, { signal: AbortSignal.timeout(5000) });
  if (!response.ok) throw new Error(`GET ${jwksUrl}: ${response.status}`);
  const keySet = createLocalJWKSet((await response.json()) as JSONWebKeySet);
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolMax, connectionTimeoutMillis: 3000 });
  const account = accountRoute(pool, keySet);

  const app = fastify({ logger: false, keepAliveTimeout: 65_000 });
  app.get('/v1/account', account(true));
  app.get('/verify-each/v1/account', account(false));
  app.get('/healthz', async () => ({ status: 'ok' }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (!address || typeof address === 'string') throw new Error('no TCP address');

  const stop = async () => {
    await app.close();
    await pool.end();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
  process.once('disconnect', () => void stop());
  process.send?.({ type: 'ready', port: address.port });
}

main().catch((err: unknown) => {
  process.send?.({ type: 'error', message: err instanceof Error ? err.message : String(err) });
  console.error(err);
  process.exit(1);
});
