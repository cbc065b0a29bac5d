import { Field } from './field';

/** The 6-digit code of an authenticator app (the API's field `code`). */
export function CodeField({
  value,
  onChange,
  required = true,
  label = 'Code from the authenticator app',
}: {
  value: string;
  onChange(value: string): void;
  required?: boolean;
  label?: string;
}) {
  return (
    <Field name="code" label={label} hint="6 digits." inputMode="numeric" autoComplete="one-time-code" value={value} onChange={onChange} required={required} />
  );
}
