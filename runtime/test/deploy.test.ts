import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { componentNames } from '@switchboard/contracts/components';
import { componentNodeFlags, repoRoot } from '@switchboard/runtime/dev/mesh';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler, type IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { type IPodDisruptionBudget, PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import type { IProbe } from 'kubernetes-models/v1/Probe';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { createCredentials, credentialsSecretName, publicKeyOf, renderSecrets } from '../src/dev/component-credentials.js';
import { renderNatsHelmValues } from '../src/dev/nats-authorization.js';
import { describeObject, isBuiltInKind, type KubernetesObject, parseObjects, validateObject } from './kubernetes-objects.js';

/**
 * deploy/: the base and every overlay, rendered by kustomize, are valid Kubernetes objects and
 * keep the deployment policies (docs/operations.md, "Kubernetes"); the Secrets example and the
 * manifests of deploy/README.md are valid too. No cluster is needed: kubectl renders offline.
 */

const deployDir = path.join(repoRoot, 'deploy');
const kustomizations = ['base', ...readdirSync(path.join(deployDir, 'overlays')).map((overlay) => `overlays/${overlay}`)];

// CI has kubectl, so there a missing one fails the renders instead of skipping them.
const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;

function render(kustomization: string): KubernetesObject[] {
  const text = execFileSync('kubectl', ['kustomize', path.join(deployDir, kustomization)], { encoding: 'utf8' });
  return parseObjects(text, `deploy/${kustomization}`);
}

/** The CMD of each final target of deploy/Dockerfile: how its image starts. */
function dockerfileCommands(): Map<string, string[]> {
  const commands = new Map<string, string[]>();
  let target = '';
  for (const line of readFileSync(path.join(deployDir, 'Dockerfile'), 'utf8').split('\n')) {
    target = /^FROM\s+\S+\s+AS\s+(\S+)/i.exec(line)?.[1] ?? target;
    const cmd = /^CMD\s+(\[.*\])\s*$/.exec(line)?.[1];
    if (cmd) commands.set(target, JSON.parse(cmd) as string[]);
  }
  return commands;
}

/** The Dockerfile target an image was built from: `ghcr.io/switchboard/keys:v1` → `keys`. */
const targetOf = (image = '') => image.split('/').pop()?.split(/[:@]/)[0] ?? '';

const units: Record<string, number> = { m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 };

/** A resource quantity as a number (NaN when it is not one). */
function quantity(value: string | number | undefined): number {
  const match = /^(\d+(?:\.\d+)?)(m|k|M|G|Ki|Mi|Gi)?$/.exec(String(value ?? ''));
  return match ? Number(match[1]) * units[match[2] ?? ''] : Number.NaN;
}

function probeProblems(container: IContainer, name: 'readinessProbe' | 'livenessProbe' | 'startupProbe'): string[] {
  const probe: IProbe | undefined = container[name];
  if (!probe) return name === 'startupProbe' ? [] : [`${name} missing`];
  const ports = container.ports ?? [];
  if (probe.grpc) return ports.some((port) => port.containerPort === probe.grpc?.port) ? [] : [`${name}: gRPC port ${probe.grpc.port} is not a container port`];
  if (probe.httpGet) {
    const target = probe.httpGet.port;
    return ports.some((port) => port.containerPort === target || port.name === target) ? [] : [`${name}: HTTP port ${target} is not a container port`];
  }
  return [`${name} is neither a gRPC nor an HTTP check`];
}

function resourceProblems(container: IContainer): string[] {
  const problems: string[] = [];
  for (const resource of ['cpu', 'memory']) {
    const request = quantity(container.resources?.requests?.[resource]);
    const limit = quantity(container.resources?.limits?.[resource]);
    if (!(request > 0)) problems.push(`no ${resource} request`);
    if (!(limit > 0)) problems.push(`no ${resource} limit`);
    if (request > limit) problems.push(`${resource} request above its limit`);
  }
  return problems;
}

function securityProblems(container: IContainer, pod: NonNullable<IDeployment['spec']>['template']['spec']): string[] {
  const context = container.securityContext ?? {};
  const problems: string[] = [];
  if (context.allowPrivilegeEscalation !== false) problems.push('privilege escalation not disabled');
  if (context.privileged) problems.push('privileged');
  if (context.readOnlyRootFilesystem !== true) problems.push('root filesystem not read-only');
  if (!context.capabilities?.drop?.includes('ALL')) problems.push('capabilities: ALL not dropped');
  if (context.capabilities?.add?.length) problems.push('capabilities added');
  if ((context.runAsNonRoot ?? pod?.securityContext?.runAsNonRoot) !== true) problems.push('runAsNonRoot not set');
  if ((context.seccompProfile ?? pod?.securityContext?.seccompProfile)?.type !== 'RuntimeDefault') problems.push('seccomp profile not RuntimeDefault');
  return problems;
}

/** The init container that migrates before the main container serves: same image and settings, the image's command with --migrate. */
function migrationProblems(deployment: IDeployment, main: IContainer, commands: Map<string, string[]>): string[] {
  if (!main.env?.some((variable) => variable.name === 'DATABASE_URL')) return [];
  const command = commands.get(targetOf(main.image));
  if (!command) return [`image ${main.image} is no target of deploy/Dockerfile`];
  const migrate = deployment.spec?.template.spec?.initContainers?.find((init) => init.image === main.image && init.args?.at(-1) === '--migrate');
  if (!migrate) return ['reads DATABASE_URL but has no init container running migrations (--migrate) with its image'];
  const problems: string[] = [];
  if (JSON.stringify([...(migrate.command ?? []), ...(migrate.args ?? [])]) !== JSON.stringify([...command, '--migrate'])) {
    problems.push(`init container ${migrate.name} does not run the image's command (${command.join(' ')}) with --migrate`);
  }
  // The same database URL, Secrets and mounts (the database's CA): it must reach what the service reaches.
  if (JSON.stringify([migrate.env, migrate.envFrom, migrate.volumeMounts]) !== JSON.stringify([main.env, main.envFrom, main.volumeMounts])) {
    problems.push(`init container ${migrate.name} has other settings, Secrets or mounts than ${main.name}`);
  }
  return problems;
}

const selects = (budget: IPodDisruptionBudget, labels: Record<string, string>) => {
  const selector = budget.spec?.selector;
  const matchLabels = Object.entries(selector?.matchLabels ?? {});
  return !selector?.matchExpressions?.length && matchLabels.length > 0 && matchLabels.every(([key, value]) => labels[key] === value);
};

function deploymentProblems(deployment: IDeployment, objects: KubernetesObject[], commands: Map<string, string[]>): string[] {
  const name = deployment.metadata?.name ?? '';
  const pod = deployment.spec?.template.spec;
  const containers = pod?.containers ?? [];
  const problems: string[] = [];
  for (const container of containers) {
    const where = `container ${container.name}`;
    problems.push(
      ...(['readinessProbe', 'livenessProbe', 'startupProbe'] as const).flatMap((probe) => probeProblems(container, probe)).map((p) => `${where}: ${p}`),
    );
    problems.push(...migrationProblems(deployment, container, commands));
  }
  for (const container of [...containers, ...(pod?.initContainers ?? [])]) {
    problems.push(...[...resourceProblems(container), ...securityProblems(container, pod)].map((p) => `container ${container.name}: ${p}`));
  }

  const autoscaler = objects
    .filter((object): object is IHorizontalPodAutoscaler => HorizontalPodAutoscaler.is(object))
    .find((hpa) => hpa.spec?.scaleTargetRef.kind === 'Deployment' && hpa.spec.scaleTargetRef.name === name);
  const minReplicas = autoscaler?.spec?.minReplicas ?? 1;
  if (!autoscaler) problems.push('no autoscaling/v2 HorizontalPodAutoscaler');
  else if (!(autoscaler.spec?.maxReplicas && autoscaler.spec.maxReplicas >= minReplicas && autoscaler.spec.metrics?.length))
    problems.push('autoscaler without a range or metrics');
  // A count in the Deployment would reset the autoscaler's at every apply.
  if (autoscaler && deployment.spec?.replicas !== undefined) problems.push('sets replicas although an autoscaler owns them');

  const labels = deployment.spec?.template.metadata?.labels ?? {};
  const budgets = objects.filter((object): object is IPodDisruptionBudget => PodDisruptionBudget.is(object)).filter((budget) => selects(budget, labels));
  if (budgets.length !== 1) problems.push(`${budgets.length} PodDisruptionBudgets select its pods, not one`);
  for (const budget of budgets) {
    const { maxUnavailable, minAvailable } = budget.spec ?? {};
    // A budget that allows no eviction at the smallest replica count blocks node drains for ever.
    const allowsEviction = maxUnavailable === 1 || (typeof minAvailable === 'number' && minAvailable < minReplicas);
    if (!allowsEviction) problems.push(`PodDisruptionBudget ${budget.metadata?.name} allows no eviction at ${minReplicas} replicas`);
  }
  return problems.map((problem) => `Deployment/${name}: ${problem}`);
}

/** Every policy the rendered manifests must keep, as a list of what breaks them (empty when none does). */
function policyProblems(objects: KubernetesObject[]): string[] {
  const commands = dockerfileCommands();
  const problems = objects
    .filter((object): object is IDeployment => Deployment.is(object))
    .flatMap((deployment) => deploymentProblems(deployment, objects, commands));
  if (!objects.some(Deployment.is)) problems.push('no Deployment at all');
  const defaultDeny = objects
    .filter(NetworkPolicy.is)
    .some(
      (policy) =>
        Object.keys(policy.spec?.podSelector ?? { none: true }).length === 0 &&
        (['Ingress', 'Egress'] as const).every((type) => policy.spec?.policyTypes?.includes(type)) &&
        !policy.spec?.ingress?.length &&
        !policy.spec?.egress?.length,
    );
  if (!defaultDeny) problems.push('no default-deny NetworkPolicy (every pod, ingress and egress, no rule)');
  const namespaces = objects.filter(Namespace.is);
  if (!namespaces.every((namespace) => namespace.metadata?.labels?.['pod-security.kubernetes.io/enforce'] === 'restricted')) {
    problems.push('a Namespace does not enforce the restricted Pod Security Standard');
  }
  return problems;
}

describe.skipIf(!hasKubectl && !process.env.CI)('deploy/ manifests', () => {
  it('lists the base and the production overlay', () => {
    expect(kustomizations).toContain('base');
    expect(kustomizations).toContain('overlays/production');
  });

  describe.each(kustomizations)('kubectl kustomize deploy/%s', (kustomization) => {
    let objects: KubernetesObject[] = [];
    beforeAll(() => {
      objects = render(kustomization);
    });

    it('renders objects that are valid against their Kubernetes schemas', () => {
      expect(objects.length).toBeGreaterThan(0);
      for (const object of objects) validateObject(object, `deploy/${kustomization}`);
    });

    it('keeps the deployment policies', () => {
      expect(policyProblems(objects)).toEqual([]);
    });

    it('puts every object in the switchboard namespace', () => {
      const elsewhere = objects.filter((object) => object.kind !== 'Namespace' && object.metadata?.namespace !== 'switchboard').map(describeObject);
      expect(elsewhere).toEqual([]);
    });
  });
});

describe('deploy/Dockerfile', () => {
  it('starts every component with the V8 flags of the dev mesh, so what the benches measure is what runs', () => {
    const commands = dockerfileCommands();
    expect([...commands.keys()].sort()).toEqual(['billing', 'conversations', 'data-plane', 'gateway', 'identity', 'keys', 'webhooks']);
    for (const [target, command] of commands) expect(command.slice(0, componentNodeFlags.length + 1), target).toEqual(['node', ...componentNodeFlags]);
  });
});

describe('deploy/ examples', () => {
  it('shows valid Secrets in deploy/base/secrets.example.yaml', () => {
    const source = 'deploy/base/secrets.example.yaml';
    const objects = parseObjects(readFileSync(path.join(repoRoot, source), 'utf8'), source);
    expect(objects.map((object) => object.kind)).toContain('Secret');
    for (const object of objects) validateObject(object, source);
  });

  it('shows valid manifests in the YAML blocks of deploy/README.md', () => {
    const readme = readFileSync(path.join(deployDir, 'README.md'), 'utf8');
    const blocks = [...readme.matchAll(/^```ya?ml\n([\s\S]*?)^```$/gm)].map((match) => match[1]);
    expect(blocks.length).toBeGreaterThan(0);
    const objects = blocks.flatMap((block, index) => parseObjects(block, `deploy/README.md, YAML block ${index + 1}`));
    // Custom resources (the CloudNativePG Cluster) have no schema here; Kubernetes' own kinds must validate.
    for (const object of objects.filter(isBuiltInKind)) validateObject(object, 'deploy/README.md');
    expect(objects.filter((object) => !isBuiltInKind(object)).map((object) => object.apiVersion)).toEqual(['postgresql.cnpg.io/v1']);
  });
});

/** Who may call whom (the access rules of the protos): the components each keyring holds keys of. */
const keyringMembers: Record<string, string[]> = {
  gateway: ['gateway'],
  'data-plane': ['data-plane'],
  identity: ['gateway', 'identity'],
  keys: ['billing', 'data-plane', 'gateway', 'identity', 'keys', 'webhooks'],
  billing: ['billing', 'conversations', 'data-plane', 'gateway'],
  conversations: ['conversations', 'data-plane', 'gateway', 'identity'],
  webhooks: ['data-plane', 'gateway', 'webhooks'],
};

describe('per-component credentials (npm run credentials)', () => {
  const state = createCredentials('switchboard', true);
  const secrets = parseObjects(renderSecrets(state, 'switchboard'), 'secrets.yaml');
  const secretOf = (name: string) => secrets.find((object) => object.metadata?.name === name) as { stringData?: Record<string, string> } | undefined;
  const entries = (keyring = '') => keyring.split(',').map((entry) => [entry.slice(0, entry.indexOf(':')), entry.slice(entry.indexOf(':') + 1)]);

  it('renders a valid Secret per component (and the agent), each keyring holding exactly the keys of its callers', () => {
    for (const object of secrets) validateObject(object, 'secrets.yaml');
    expect(secrets.map((object) => object.metadata?.name).sort()).toEqual([...componentNames, 'agent'].map(credentialsSecretName).sort());
    for (const component of componentNames) {
      const data = secretOf(credentialsSecretName(component))?.stringData ?? {};
      const keyring = entries(data.SWITCHBOARD_MESH_KEYS);
      expect(keyring[0][0], `${component} signs with its own key`).toBe(component);
      expect([...new Set(keyring.map(([member]) => member))].sort(), component).toEqual(keyringMembers[component]);
      // Each caller's key is the one that caller signs with.
      for (const [member, key] of keyring)
        expect(entries(secretOf(credentialsSecretName(member))?.stringData?.SWITCHBOARD_MESH_KEYS)[0]).toEqual([member, key]);
      expect(data.NATS_NKEY_SEED).toMatch(/^SU[A-Z2-7]+$/);
    }
  });

  it('renders NATS Helm values with one user per component and the agent, by the public key of its Secret’s seed', () => {
    const values = parseYaml(renderNatsHelmValues(state)) as {
      config: { merge: { authorization: { users: { nkey: string; permissions: { publish: { allow: string[] }; subscribe: { allow: string[] } } }[] } } };
    };
    const users = values.config.merge.authorization.users;
    const seeds = [...componentNames, 'agent'].map((name) => secretOf(credentialsSecretName(name))?.stringData?.NATS_NKEY_SEED ?? '');
    expect(users.map((user) => user.nkey).sort()).toEqual(seeds.map(publicKeyOf).sort());
    for (const user of users) {
      expect(user.permissions.publish.allow.length).toBeGreaterThan(0);
      // Nobody may publish or subscribe to everything, nor to another one's replies.
      expect(
        [...user.permissions.publish.allow, ...user.permissions.subscribe.allow].filter((subject) => subject === '>' || subject.startsWith('_INBOX.')),
      ).toEqual([]);
    }
  });

  it.skipIf(!hasKubectl && !process.env.CI)('has every Deployment read its own credentials Secret, optional beside the shared mesh secret', () => {
    const deployments = render('base').filter((object): object is IDeployment => Deployment.is(object));
    expect(deployments.map((deployment) => deployment.metadata?.name).sort()).toEqual([...componentNames].sort());
    for (const deployment of deployments) {
      const name = deployment.metadata?.name ?? '';
      const env = deployment.spec?.template.spec?.containers[0].env ?? [];
      const from = (variable: string) => env.find((entry) => entry.name === variable)?.valueFrom?.secretKeyRef;
      for (const variable of ['SWITCHBOARD_MESH_KEYS', 'NATS_NKEY_SEED']) {
        expect(from(variable), `${name} ${variable}`).toEqual({ name: credentialsSecretName(name), key: variable, optional: true });
      }
      expect(from('SWITCHBOARD_MESH_SECRET'), name).toEqual({ name: 'switchboard-secrets', key: 'SWITCHBOARD_MESH_SECRET', optional: true });
      const others = env.filter(
        (entry) =>
          /^switchboard-.*-credentials$/.test(entry.valueFrom?.secretKeyRef?.name ?? '') && entry.valueFrom?.secretKeyRef?.name !== credentialsSecretName(name),
      );
      expect(others, name).toEqual([]);
    }
  });
});
