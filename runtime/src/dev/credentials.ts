import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { type ComponentName, componentNames, isComponentName } from '@switchboard/contracts/components';
import { readNamespace } from '../config.js';
import { type CredentialsState, createCredentials, renderSecrets, retire, rotate } from './component-credentials.js';
import { renderNatsAuthorization, renderNatsHelmValues } from './nats-authorization.js';

/**
 * `npm run credentials -- --namespace switchboard --out <dir>` (docs/operations.md#nats-credentials):
 * a NATS NKey and a mesh key per component, written as the NATS server's authorization (a config
 * fragment and Helm values, public keys only) and one Kubernetes Secret per component. The
 * state (credentials.json) stays in `<dir>`, so `--rotate <component>` and `--retire <component>`
 * change one component's credentials and write everything again. Secrets are written to files of
 * mode 0600 and never printed.
 */
const usage = `npm run credentials -- --out <dir> [--namespace switchboard] [--kube-namespace switchboard] [--agent]
npm run credentials -- --out <dir> --rotate <component>   (new credentials first, the previous kept)
npm run credentials -- --out <dir> --retire <component>   (once every pod runs with the new ones)`;

const stateFile = 'credentials.json';

function componentArg(value: string | undefined): ComponentName | undefined {
  if (value === undefined) return undefined;
  if (!isComponentName(value)) throw new Error(`unknown component "${value}": one of ${componentNames.join(', ')}`);
  return value as ComponentName;
}

/** Writes the generator's files into `out` (mode 0600); returns their names. */
export async function writeCredentials(out: string, state: CredentialsState, kubeNamespace: string): Promise<string[]> {
  await mkdir(out, { recursive: true, mode: 0o700 });
  const files: Record<string, string> = {
    [stateFile]: `${JSON.stringify(state, null, 2)}\n`,
    'nats-authorization.conf': renderNatsAuthorization(state),
    'nats-values.yaml': renderNatsHelmValues(state),
    'secrets.yaml': renderSecrets(state, kubeNamespace),
  };
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(out, name), text, { mode: 0o600 });
  return Object.keys(files);
}

export async function readCredentials(out: string): Promise<CredentialsState> {
  return JSON.parse(await readFile(path.join(out, stateFile), 'utf8')) as CredentialsState;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      out: { type: 'string' },
      namespace: { type: 'string' },
      'kube-namespace': { type: 'string', default: 'switchboard' },
      agent: { type: 'boolean', default: false },
      rotate: { type: 'string' },
      retire: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help || !values.out) {
    console.log(usage);
    process.exitCode = values.help ? 0 : 2;
    return;
  }
  const rotated = componentArg(values.rotate);
  const retired = componentArg(values.retire);
  let state: CredentialsState;
  if (rotated || retired) {
    state = await readCredentials(values.out);
    if (rotated) state = rotate(state, rotated);
    if (retired) state = retire(state, retired);
  } else {
    const exists = await readFile(path.join(values.out, stateFile)).then(
      () => true,
      () => false,
    );
    if (exists) throw new Error(`${values.out} holds credentials already: use --rotate or --retire, or another --out`);
    state = createCredentials(readNamespace({ SWITCHBOARD_NAMESPACE: values.namespace }), values.agent);
  }
  const files = await writeCredentials(values.out, state, values['kube-namespace']);
  console.log(`wrote ${files.map((file) => path.join(values.out as string, file)).join(', ')} (mode 0600; secrets.yaml and credentials.json are secret)`);
}

// Run as a command (npm run credentials); imported by the tests for writeCredentials.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    console.error((err as Error).message);
    process.exit(1);
  });
}
