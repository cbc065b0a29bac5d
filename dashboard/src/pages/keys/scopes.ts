/** The scopes of an API key (docs/api/keys.md#scopes), in the order the pages show them, with what each allows. */
export const keyScopes = [
  { scope: 'inference', label: 'Inference', what: 'model requests: chat completions, the model list, its own generations, feedback and GET /v1/key' },
  { scope: 'read', label: 'Read', what: 'every GET of the management API that its creator may make' },
  { scope: 'manage', label: 'Manage', what: 'every other management call its creator may make (creating keys, changing settings)' },
] as const;

/** A key's scopes in words, in the pages' order: "Inference, Read". */
export function scopesLabel(scopes: readonly string[]): string {
  return keyScopes
    .filter(({ scope }) => scopes.includes(scope))
    .map(({ label }) => label)
    .join(', ');
}
