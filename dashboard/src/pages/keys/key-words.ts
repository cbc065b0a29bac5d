/** A key's settings in words, and the facts the pages decide from them (pure: unit-tested in dashboard/test). */

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

/** Whether the key's expiry has passed (by this browser's clock): the API then refuses it, though its status stays `active`. */
export function isExpired(expiresAt: string | null, now = Date.now()): boolean {
  return expiresAt !== null && new Date(expiresAt).getTime() <= now;
}

/** Percents in words: "50%, 80% and 100%". */
export function percentsLabel(percents: number[]): string {
  const words = percents.map((pct) => `${pct}%`);
  return words.length > 1 ? `${words.slice(0, -1).join(', ')} and ${words.at(-1)}` : (words[0] ?? '');
}
