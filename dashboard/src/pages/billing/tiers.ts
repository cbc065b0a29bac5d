/** The pricing tiers of the API's usage reports (billing.proto, TierBreakdown), in the order shown, with their chart colours. */
export const tiers = [
  { key: 'fast', label: 'Fast', description: 'service/fast, priced per token', color: '#1f4fd1' },
  { key: 'balanced', label: 'Balanced', description: 'service/balanced, priced per token', color: '#0f7b6c' },
  { key: 'passthrough', label: 'Passthrough', description: "other models, the provider's cost plus the plan's markup", color: '#b35900' },
  { key: 'byok', label: 'Your own provider key', description: "the plan's fee on the provider's cost", color: '#7a3eb1' },
] as const;
