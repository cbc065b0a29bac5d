import { type HTMLInputTypeAttribute, type ReactNode, useId, useRef } from 'react';
import { useFieldError, useRegisterField } from './form';

export interface FieldProps {
  /** The API's name of the input (`password`, `full_name`): an error whose `field` is this name is shown here. */
  name: string;
  label: string;
  value: string;
  onChange(value: string): void;
  type?: HTMLInputTypeAttribute;
  /** A line under the label: the rules of the value. */
  hint?: ReactNode;
  required?: boolean;
  autoComplete?: string;
  inputMode?: 'text' | 'numeric' | 'decimal' | 'email' | 'url';
  /** Renders a select with these choices instead of an input. */
  options?: { value: string; label: string }[];
  /** Renders a textarea of this many rows instead of an input. */
  rows?: number;
  spellCheck?: boolean;
}

/**
 * A labelled input of a Form. When the form's last error names this field, the input is marked
 * `aria-invalid`, the message is shown under it (and read with it: `aria-describedby`) with the
 * field named by its label rather than its API name, and the input gets the focus.
 */
export function Field({ name, label, value, onChange, type = 'text', hint, required, autoComplete, inputMode, options, rows, spellCheck }: FieldProps) {
  const id = useId();
  const input = useRef<HTMLInputElement & HTMLSelectElement & HTMLTextAreaElement>(null);
  useRegisterField(name, input);
  const error = useFieldError(name, label);
  const describedBy = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  const common = {
    ref: input,
    id,
    name,
    value,
    required,
    'aria-invalid': error ? true : undefined,
    'aria-describedby': describedBy,
  };
  return (
    <div className={error ? 'field invalid' : 'field'}>
      <label htmlFor={id}>
        {label}
        {!required && <span className="optional"> (optional)</span>}
      </label>
      {hint && (
        <p id={`${id}-hint`} className="hint">
          {hint}
        </p>
      )}
      {options ? (
        <select {...common} onChange={(event) => onChange(event.target.value)}>
          {options.map((option) => (
            <option key={option.value} value={option.value}>
              {option.label}
            </option>
          ))}
        </select>
      ) : rows ? (
        <textarea {...common} rows={rows} spellCheck={spellCheck} onChange={(event) => onChange(event.target.value)} />
      ) : (
        <input
          {...common}
          type={type}
          autoComplete={autoComplete}
          inputMode={inputMode}
          spellCheck={spellCheck}
          onChange={(event) => onChange(event.target.value)}
        />
      )}
      {error && (
        <p id={`${id}-error`} className="field-error">
          {error}
        </p>
      )}
    </div>
  );
}
