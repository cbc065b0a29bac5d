import type { ReactNode } from 'react';
import { Field } from '../../components/field';

/** The endpoint's https:// URL (the API's `url`). */
export function UrlField({ value, onChange, hint }: { value: string; onChange(value: string): void; hint: ReactNode }) {
  return <Field name="url" label="Endpoint URL" type="url" inputMode="url" autoComplete="off" hint={hint} value={value} onChange={onChange} required />;
}
