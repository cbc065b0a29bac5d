import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { parseAllDocuments } from 'yaml';

/** What every Kubernetes object has; the rest is checked against its kind's schema. */
export interface KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata?: { name?: string; namespace?: string };
}

/**
 * The kinds the manifests and the deploy guide may hold, each with the schema of its Kubernetes
 * version (kubernetes-models). A kind outside this list is refused rather than passed unchecked:
 * add its model here when a manifest needs it.
 */
const models = new Map<string, new (data: never) => { validate(): void }>(
  [ConfigMap, Deployment, HorizontalPodAutoscaler, Namespace, NetworkPolicy, PodDisruptionBudget, Secret, Service].map((model) => [
    `${model.apiVersion}/${model.kind}`,
    model,
  ]),
);

/** `Kind/name` in messages. */
export const describeObject = (object: KubernetesObject) => `${object.kind}/${object.metadata?.name ?? '(no name)'}`;

/** The objects of a multi-document YAML text; a syntax error or a document without apiVersion and kind throws, naming `source`. */
export function parseObjects(text: string, source: string): KubernetesObject[] {
  return parseAllDocuments(text).flatMap((document, index) => {
    if (document.errors.length > 0) throw new Error(`${source}, document ${index + 1}: ${document.errors.map((err) => err.message).join('; ')}`);
    const object = document.toJS() as KubernetesObject | null;
    if (object === null) return [];
    if (typeof object.apiVersion !== 'string' || typeof object.kind !== 'string') throw new Error(`${source}, document ${index + 1}: no apiVersion or kind`);
    return [object];
  });
}

/** Whether the object is of a kind Kubernetes itself defines (not a custom resource). */
export function isBuiltInKind(object: KubernetesObject): boolean {
  const group = object.apiVersion.includes('/') ? object.apiVersion.split('/')[0] : '';
  return !group.includes('.') || group.endsWith('.k8s.io');
}

/** Throws when the object breaks its kind's schema, or is of a kind without a model. */
export function validateObject(object: KubernetesObject, source: string): void {
  const Model = models.get(`${object.apiVersion}/${object.kind}`);
  if (!Model) throw new Error(`${source}: ${describeObject(object)} is of ${object.apiVersion} ${object.kind}, which has no schema here`);
  try {
    new Model(object as never).validate();
  } catch (err) {
    throw new Error(`${source}: ${describeObject(object)}: ${(err as Error).message}`);
  }
}
