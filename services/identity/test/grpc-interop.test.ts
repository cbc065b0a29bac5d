import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintMeshToken, type RunningIdentity, repoRoot, startIdentity, uniqueEmail } from './helpers.js';

/**
 * docs/api/overview.md#protocols, docs/api/internal-calls.md#protocols-and-json: internal calls work from a plain @grpc/grpc-js client that loads the .proto files
 * (no generated code), with a mesh token; health needs none.
 */

// biome-ignore lint/suspicious/noExplicitAny: replies of @grpc/proto-loader are untyped objects.
type Reply = Record<string, any>;
type UnaryMethod = (request: object, metadata: grpc.Metadata, callback: (err: grpc.ServiceError | null, response?: Reply) => void) => void;
type GrpcClient = grpc.Client & Record<string, UnaryMethod>;
type ClientConstructor = new (address: string, credentials: grpc.ChannelCredentials) => GrpcClient;

function call(client: GrpcClient, method: string, request: object, metadata = new grpc.Metadata()): Promise<Reply> {
  return new Promise((resolve, reject) => {
    client[method](request, metadata, (err, response) => (err ? reject(err) : resolve(response ?? {})));
  });
}

function bearer(token: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return metadata;
}

describe('identity over plain gRPC (@grpc/grpc-js + proto-loader)', () => {
  let service: RunningIdentity;
  let health: GrpcClient;
  let auth: GrpcClient;
  let account: GrpcClient;

  beforeAll(async () => {
    service = await startIdentity();
    const definition = protoLoader.loadSync(['grpc/health/v1/health.proto', 'switchboard/identity/v1/identity.proto'], {
      // The roots of buf.yaml's modules: identity.proto imports the vendored buf.validate rules.
      includeDirs: [path.join(repoRoot, 'contracts/proto'), path.join(repoRoot, 'contracts/vendor'), path.join(repoRoot, 'node_modules/google-proto-files')],
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    const loaded = grpc.loadPackageDefinition(definition) as unknown as Reply;
    const address = `127.0.0.1:${service.port}`;
    const insecure = grpc.credentials.createInsecure();
    health = new (loaded.grpc.health.v1.Health as ClientConstructor)(address, insecure);
    auth = new (loaded.switchboard.identity.v1.AuthService as ClientConstructor)(address, insecure);
    account = new (loaded.switchboard.identity.v1.AccountService as ClientConstructor)(address, insecure);
  });

  afterAll(async () => {
    for (const client of [health, auth, account]) client?.close();
    await service?.stop();
  });

  it('answers grpc.health.v1.Health/Check without a token', async () => {
    const response = await call(health, 'Check', { service: '' });
    expect(response.status).toBe('SERVING');
  });

  it('registers and reads the account with a gateway mesh token', async () => {
    const email = uniqueEmail('grpc');
    const registered = await call(
      auth,
      'Register',
      { email, password: 'correct horse battery staple', full_name: 'Grace Hopper' },
      bearer(await mintMeshToken('identity', { caller: 'gateway' })),
    );
    expect(registered.user.email).toBe(email);
    expect(registered.user.user_id).toMatch(/^usr_/);
    expect(registered.user.personal_workspace_id).toMatch(/^org_/);
    expect(registered.session.token_type).toBe('Bearer');
    expect(registered.session.expires_in).toBe(900);

    const token = await mintMeshToken('identity', { caller: 'gateway', principalId: registered.user.user_id, principalType: 'user' });
    const me = await call(account, 'GetAccount', {}, bearer(token));
    expect(me).toMatchObject({
      user_id: registered.user.user_id,
      email,
      email_verified: false,
      full_name: 'Grace Hopper',
      two_factor_enabled: false,
      personal_workspace_id: registered.user.personal_workspace_id,
    });
    expect(Number(me.created_at.seconds)).toBeGreaterThan(0);
  });

  it('refuses calls without a mesh token', async () => {
    await expect(call(account, 'GetAccount', {})).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    await expect(call(auth, 'Register', { email: uniqueEmail('anon'), password: 'correct horse battery staple' })).rejects.toMatchObject({
      code: grpc.status.UNAUTHENTICATED,
    });
  });

  it('refuses a mesh token for another audience or signed with another secret', async () => {
    const claims = { caller: 'gateway', principalId: 'usr_x', principalType: 'user' as const };
    const otherAudience = await mintMeshToken('keys', claims);
    await expect(call(account, 'GetAccount', {}, bearer(otherAudience))).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    const forged = await new MeshTokens('a-different-secret-that-is-32-bytes-long!').mint('identity', claims);
    await expect(call(account, 'GetAccount', {}, bearer(forged))).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
  });

  it('answers UNAUTHENTICATED for an unknown refresh token', async () => {
    const token = await mintMeshToken('identity', { caller: 'gateway' });
    await expect(call(auth, 'Refresh', { refresh_token: 'x' }, bearer(token))).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
  });
});
