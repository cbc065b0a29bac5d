import { SwitchboardError } from '@switchboard/sdk';
import { createContext, type FormEvent, type ReactNode, useCallback, useContext, useEffect, useMemo, useRef, useState } from 'react';
import { labelFieldMessage } from '../field-label';
import { ErrorMessage } from './error-message';

interface FormContextValue {
  /** The error of the last submission, if it failed. */
  error: unknown;
  /** A field's input, so that an error naming it can focus it; returns the unregistration. */
  register(name: string, input: HTMLElement): () => void;
}

const FormContext = createContext<FormContextValue | undefined>(undefined);

/**
 * An input error found before calling the API (a confirmation left unticked), shaped like the
 * API's own 400 so the form shows it next to the field the same way.
 */
export function fieldError(field: string, message: string): SwitchboardError {
  return new SwitchboardError({ status: 400, code: 'invalid_request', message, field });
}

/**
 * The form's error as it concerns the field `name`: its message when the API's `field` names it,
 * with the API's name of the field replaced by `label`, the name the reader knows it by.
 */
export function useFieldError(name: string, label?: string): string | undefined {
  const error = useContext(FormContext)?.error;
  if (!(error instanceof SwitchboardError) || error.field !== name) return undefined;
  return label ? labelFieldMessage(error.message, name, label) : error.message;
}

/** Registers a field's input with the enclosing Form (if any). */
export function useRegisterField(name: string, input: { current: HTMLElement | null }): void {
  const register = useContext(FormContext)?.register;
  useEffect(() => (register && input.current ? register(name, input.current) : undefined), [register, name, input]);
}

export interface FormProps {
  /** Sends the form; a rejection (a SwitchboardError) is shown, next to the field its `field` names. */
  onSubmit(): Promise<void>;
  submitLabel: string;
  /** The button's text while the submission runs (default: `submitLabel…`). */
  busyLabel?: string;
  /** A destructive action: the submit button is styled as one. */
  danger?: boolean;
  /** More controls next to the submit button (a Cancel button, a link). */
  actions?: ReactNode;
  /** The form's accessible name when no heading right above names it. */
  label?: string;
  children: ReactNode;
}

/**
 * A form that sends itself through `onSubmit`: the button is disabled while it runs, and a
 * failure is shown in words. An error whose `field` names one of the form's fields is shown next
 * to that field (`aria-invalid`, focused); any other error is an alert above the button. Inputs
 * are checked by the API, not the browser (`noValidate`), so every message has the same source.
 */
export function Form({ onSubmit, submitLabel, busyLabel, danger, actions, label, children }: FormProps) {
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const fields = useRef(new Map<string, HTMLElement>());
  const alert = useRef<HTMLDivElement>(null);

  const register = useCallback((name: string, input: HTMLElement) => {
    fields.current.set(name, input);
    return () => {
      if (fields.current.get(name) === input) fields.current.delete(name);
    };
  }, []);
  const context = useMemo(() => ({ error, register }), [error, register]);
  const field = error instanceof SwitchboardError && error.field && fields.current.has(error.field) ? error.field : undefined;

  useEffect(() => {
    if (error === undefined) return;
    (field ? fields.current.get(field) : alert.current)?.focus();
  }, [error, field]);

  const submit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(undefined);
    try {
      await onSubmit();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <FormContext.Provider value={context}>
      <form className="form" onSubmit={submit} noValidate aria-busy={busy} aria-label={label}>
        {children}
        {error !== undefined && !field && (
          <div ref={alert} tabIndex={-1} className="form-error">
            <ErrorMessage error={error} />
          </div>
        )}
        <div className="form-actions">
          <button type="submit" className={danger ? 'button danger' : 'button primary'} disabled={busy}>
            {busy ? (busyLabel ?? `${submitLabel}…`) : submitLabel}
          </button>
          {actions}
        </div>
      </form>
    </FormContext.Provider>
  );
}
