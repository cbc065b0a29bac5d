/** The routing policies of the API (keys.proto, `routing_policy`), in words. */
export const routingPolicies = [
  { value: 'any', label: 'Any region' },
  { value: 'cn-only', label: 'Only models hosted in China' },
  { value: 'overseas-only', label: 'Only models hosted outside China' },
];

export function routingPolicyLabel(policy: string): string {
  return routingPolicies.find((candidate) => candidate.value === policy)?.label ?? policy;
}
