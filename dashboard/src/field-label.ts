/**
 * An API error message about the field `field` (`monthly_spend_cap_usd must be a decimal`) in the
 * words of the form: each mention of the field's API name becomes the input's label
 * (`Monthly cap (USD) must be a decimal`), lower-cased inside a sentence unless it starts with an
 * acronym (`URL`). The API's name is what travels with the error; the label is what the reader sees.
 */
export function labelFieldMessage(message: string, field: string, label: string): string {
  if (!field || !label) return message;
  const mention = new RegExp(`(?<![\\w.])${field.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w])`, 'g');
  const inSentence = /^[A-Z][A-Z]/.test(label) ? label : label.charAt(0).toLowerCase() + label.slice(1);
  return message.replace(mention, (_match, offset: number) => (offset === 0 ? label : inSentence));
}
