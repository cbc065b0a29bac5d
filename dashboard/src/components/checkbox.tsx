import { type ReactNode, useId, useRef } from 'react';
import { useFieldError, useRegisterField } from './form';

/** A labelled checkbox of a Form (a confirmation, an option); errors naming `name` show under it like a Field's. */
export function Checkbox({ name, label, checked, onChange }: { name: string; label: ReactNode; checked: boolean; onChange(checked: boolean): void }) {
  const id = useId();
  const input = useRef<HTMLInputElement>(null);
  useRegisterField(name, input);
  const error = useFieldError(name, typeof label === 'string' ? label : undefined);
  return (
    <div className={error ? 'field checkbox invalid' : 'field checkbox'}>
      <input
        ref={input}
        id={id}
        name={name}
        type="checkbox"
        checked={checked}
        aria-invalid={error ? true : undefined}
        aria-describedby={error ? `${id}-error` : undefined}
        onChange={(event) => onChange(event.target.checked)}
      />
      <label htmlFor={id}>{label}</label>
      {error && (
        <p id={`${id}-error`} className="field-error">
          {error}
        </p>
      )}
    </div>
  );
}
