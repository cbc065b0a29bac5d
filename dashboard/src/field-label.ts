/**
 * An API error message about the field `field` (`monthly_spend_cap_usd must be a decimal`) in the
 * words of the form: each mention of the field's API name becomes the input's label
 * (`Monthly spend cap in USD must be a decimal`), lower-cased inside a sentence unless it starts
 * with an acronym (`URL`). Only snake_case names are replaced: a one-word name (`token`,
 * `password`) is already a word of the sentence ("The invitation token is not valid.").
 */
export function labelFieldMessage(message: string, field: string, label: string): string {
  if (!field.includes('_') || !label) return message;
  const mention = new RegExp(`(?<![\\w.])${field.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w])`, 'g');
  const inSentence = /^[A-Z][A-Z]/.test(label) ? label : label.charAt(0).toLowerCase() + label.slice(1);
  return message.replace(mention, (_match, offset: number) => (offset === 0 ? label : inSentence));
}
