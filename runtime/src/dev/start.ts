import path from 'node:path';
import { createLogger } from '../log.js';
import { type Component, components, repoRoot, startMesh } from './mesh.js';

/** `npm start`: the whole mesh in the foreground, logs prefixed by component, Ctrl-C stops all. */
const colours = ['\x1b[36m', '\x1b[33m', '\x1b[35m', '\x1b[32m', '\x1b[34m', '\x1b[31m'];
const width = Math.max(...components.map((c) => c.length));
const prefix = (component: Component) => {
  const label = component.padEnd(width);
  return process.stdout.isTTY ? `${colours[components.indexOf(component)]}${label}\x1b[0m | ` : `${label} | `;
};

const log = createLogger('mesh');
const dataDir = path.resolve(process.env.SWITCHBOARD_DATA_DIR ?? path.join(repoRoot, '.data'));

try {
  const mesh = await startMesh({ dataDir, onLine: (component, line) => process.stdout.write(`${prefix(component)}${line}\n`) });
  log.info({ gateway: mesh.gatewayUrl, docs: `${mesh.gatewayUrl}/docs`, mailbox: mesh.env.MAILBOX_DIR }, 'Switchboard is ready');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping the mesh');
    await mesh.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
} catch (err) {
  log.fatal({ err: (err as Error).message }, 'the mesh could not start');
  process.exit(1);
}
