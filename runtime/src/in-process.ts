import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { DescService } from '@bufbuild/protobuf';
import { type Client, type Code, ConnectError, type ConnectRouter, createClient, createRouterTransport, type Interceptor } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { AuditTrail } from './audit.js';
import { requestIdKey } from './call-context.js';
import { readDataKeys } from './config.js';
import { createDb, migrate } from './db.js';
import { newId } from './ids.js';
import { checkingInput } from './input-rules.js';
import { createLogger } from './log.js';
import { type MeshClaims, MeshTokens } from './mesh-token.js';
import { Metrics } from './metrics.js';
import { recordEvent, recordEvents } from './outbox.js';
import { guardRpc, ruleOf } from './policy.js';
import { translateError, verifyMeshCaller } from './server.js';
import type { ServiceRuntime } from './service.js';
import { requireEnv } from './testing.js';

/** What a service's `prepare<Service>` builds its handlers from, for a test: no RPC server, no NATS. */
export type InProcessRuntime = Pick<ServiceRuntime, 'name' | 'db' | 'log' | 'recordEvent' | 'recordEvents' | 'meshTokens' | 'metrics' | 'audit'> & {
  config: Pick<ServiceRuntime['config'], 'dataKeys'>;
};

export interface InProcessService {
  runtime: InProcessRuntime;
  /**
   * Serves `routes` (the service's `registerRoutes` with its handlers) in this process
   * (createRouterTransport) with what startRpcServer puts around every call: the mesh token
   * verified into the caller's claims, the request id, and the RPC's access rule from its proto
   * (policy.ts). Returns a function that makes a client calling as the component and principal
   * `claims` name.
   */
  serve(routes: (router: ConnectRouter) => void): <S extends DescService>(service: S, claims: MeshClaims) => Client<S>;
  /** Drops the service's schema and closes its pool. */
  stop(): Promise<void>;
}

/**
 * A service for a handler test: a schema of its own on the test Postgres (DATABASE_URL of
 * runtime/test/global-setup.ts) with its migrations, and the runtime main.ts would give its
 * handlers; events are written to its outbox and never published.
 */
export async function inProcessService(name: string, migrationsDir: URL): Promise<InProcessService> {
  const schema = `${name}_in_process_${randomBytes(3).toString('hex')}`;
  const db = createDb(requireEnv('DATABASE_URL'), schema, 4);
  await migrate(db, schema, fileURLToPath(migrationsDir));
  const meshTokens = new MeshTokens(randomBytes(32).toString('base64url'));
  const log = createLogger(`${name}-in-process`, 'silent');
  const writeEvent: ServiceRuntime['recordEvent'] = (trx, schema, event) => recordEvent(trx, schema, event, { producer: name, subjectPrefix: 'in-process' });
  const runtime: InProcessRuntime = {
    name,
    db,
    log,
    meshTokens,
    metrics: new Metrics(name),
    config: { dataKeys: readDataKeys() },
    recordEvent: writeEvent,
    recordEvents: (trx, schema, events) => recordEvents(trx, schema, events, { producer: name, subjectPrefix: 'in-process' }),
    audit: new AuditTrail({ log, db, recordEvent: writeEvent }),
  };
  // What startRpcServer puts around every call: the caller from the mesh token, the request id,
  // the RPC's access rule, and errors translated as the real server translates them.
  const guard: Interceptor = (next) => async (req) => {
    const requestId = req.header.get('x-request-id') || newId('req');
    req.contextValues.set(requestIdKey, requestId);
    await verifyMeshCaller(meshTokens, name, req.header, req.contextValues, log);
    try {
      return await guardRpc(ruleOf(req.method), req.method, req.contextValues, () => next(req));
    } catch (err) {
      throw translateError(err, runtime.log, requestId, req.method.name);
    }
  };
  return {
    runtime,
    serve: (routes) => (service, claims) => {
      const sign: Interceptor = (next) => async (req) => {
        req.header.set('authorization', `Bearer ${await meshTokens.mint(name, claims)}`);
        return next(req);
      };
      return createClient(
        service,
        createRouterTransport((router) => routes(checkingInput(router)), { router: { interceptors: [guard] }, transport: { interceptors: [sign] } }),
      );
    },
    async stop() {
      await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
      await db.destroy();
    },
  };
}

/** How a call was refused: its Connect code and the public error code and field it names. */
export interface Refusal {
  code: Code;
  error: string;
  field: string;
}

/** The refusal of `call` (throws when it succeeds or fails with something other than a ConnectError). */
export async function refusalOf(call: Promise<unknown>): Promise<Refusal> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof ConnectError)) throw err;
    const detail = err.findDetails(ErrorDetailSchema)[0];
    return { code: err.code, error: detail?.code ?? '', field: detail?.field ?? '' };
  }
  throw new Error('expected the call to be refused, but it succeeded');
}
