import { useId, useRef } from 'react';
import { useCopy } from '../use-copy';

/**
 * A secret the API shows only in this answer (an API key, a signing secret): a read-only field
 * with a Copy button and a warning that it cannot be shown again.
 */
export function CopyOnce({ label, value, warning }: { label: string; value: string; warning?: string }) {
  const id = useId();
  const input = useRef<HTMLInputElement>(null);
  const { copy, status } = useCopy(value, () => input.current?.select());
  return (
    <div className="copy-once">
      <p className="warning">
        <strong>Shown only once.</strong> {warning ?? 'Copy it now and keep it somewhere safe: it cannot be shown again.'}
      </p>
      <label htmlFor={id}>{label}</label>
      <div className="copy-row">
        <input ref={input} id={id} className="secret" readOnly value={value} spellCheck={false} onFocus={(event) => event.target.select()} />
        <button type="button" className="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p className="copy-status" role="status">
        {status}
      </p>
    </div>
  );
}
