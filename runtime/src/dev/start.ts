import { createHash } from 'node:crypto';
import path from 'node:path';
import { isPortOpen } from '../infra.js';
import { createLogger } from '../log.js';
import { type Component, components, type Mesh, repoRoot, startMesh } from './mesh.js';
import { prettyLine } from './pretty-log.js';

/**
 * `npm start`: the whole mesh in the foreground, logs prefixed by component. SIGINT, SIGTERM and
 * SIGHUP stop it all; a component that dies stops the mesh with a non-zero exit and its last log
 * lines; and the components stop on their own if this runner dies (their IPC channel closes).
 */
const colours = ['\x1b[36m', '\x1b[33m', '\x1b[35m', '\x1b[32m', '\x1b[34m', '\x1b[31m', '\x1b[37m'];
const width = Math.max(...components.map((c) => c.length));
const terminal = Boolean(process.stdout.isTTY);
const prefix = (component: Component | 'mesh') => {
  const label = component.padEnd(width);
  return terminal ? `${colours[components.indexOf(component as Component)] ?? '\x1b[1m'}${label}\x1b[0m | ` : `${label} | `;
};
/** A component's line as printed: rendered for a person at a terminal, the JSON as it is otherwise. */
const printed = (component: Component | 'mesh', line: string) => `${prefix(component)}${terminal ? prettyLine(line) : line}`;

const log = terminal
  ? createLogger('mesh', undefined, { write: (line) => void process.stdout.write(`${printed('mesh', line.trimEnd())}\n`) })
  : createLogger('mesh');
const dataDir = path.resolve(process.env.SWITCHBOARD_DATA_DIR ?? path.join(repoRoot, '.data'));
// A database per data dir: two checkouts (two sets of data keys) never share one by accident.
const database = `switchboard_${createHash('sha256').update(dataDir).digest('hex').slice(0, 10)}`;

// Without a provider key a newcomer still gets answers, from the data plane's demo upstream (docs/operations.md#the-demo-upstream).
if (process.env.DEMO_UPSTREAM === undefined && process.env.NODE_ENV !== 'production') process.env.DEMO_UPSTREAM = 'true';
// Top-ups through the built-in sandbox provider unless said otherwise (Stripe's keys take over when
// set), so a newcomer funds a workspace without a payment account. Workspaces still open at 0, as
// users of the product see them (the free credit waits for a verified email):
// docs/api/billing.md#free-credit-and-the-sandbox. Production must choose explicitly, so never there.
if (process.env.NODE_ENV !== 'production') process.env.BILLING_SANDBOX ??= 'true';

let mesh: Mesh | undefined;
let stopping = false;
const stop = async (reason: string, code: number) => {
  if (stopping) return;
  stopping = true;
  log.info({ reason }, 'stopping the mesh');
  await mesh?.stop();
  process.exit(code);
};
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void stop(signal, 0));

try {
  const natsUrl = process.env.NATS_URL;
  if (natsUrl) {
    const { hostname, port } = new URL(natsUrl);
    if (!(await isPortOpen(hostname, Number(port || 4222), 2000))) {
      throw new Error(`NATS is not reachable at ${hostname}:${port || 4222} (NATS_URL=${natsUrl}). Start nats-server with JetStream (-js), or unset NATS_URL.`);
    }
  }
  if (!process.env.DATABASE_URL) log.info({ database, data_dir: dataDir }, 'using the database of this data dir');
  mesh = await startMesh({
    dataDir,
    database,
    onLine: (component, line) => process.stdout.write(`${printed(component, line)}\n`),
    onComponentExit: (component, code, lastLines) => {
      if (stopping || !mesh) return; // before ready, startMesh reports it with the output
      process.stderr.write(`${lastLines.map((line) => printed(component, line)).join('\n')}\n`);
      log.fatal({ component, exit: code }, `${component} stopped unexpectedly; stopping the mesh`);
      void stop(`${component} exited`, 1);
    },
  });
  // The dashboard and docs at the address mailed links and payment pages return to (PUBLIC_BASE_URL,
  // by default the gateway's): the session cookie is kept per host.
  const publicUrl = mesh.env.PUBLIC_BASE_URL!.replace(/\/+$/, '');
  log.info(
    {
      gateway: mesh.gatewayUrl,
      dashboard: `${publicUrl}/app/`,
      docs: `${publicUrl}/docs`,
      mailbox: mesh.env.MAILBOX_DIR,
      namespace: mesh.env.SWITCHBOARD_NAMESPACE,
    },
    'Switchboard is ready',
  );
} catch (err) {
  log.fatal({ err: (err as Error).message }, 'the mesh could not start');
  process.exit(1);
}
