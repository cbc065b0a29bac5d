import { useId, useRef, useState } from 'react';

/**
 * A secret the API shows only in this answer (an API key, a signing secret): a read-only field
 * with a Copy button and a warning that it cannot be shown again.
 */
export function CopyOnce({ label, value, warning }: { label: string; value: string; warning?: string }) {
  const id = useId();
  const input = useRef<HTMLInputElement>(null);
  const [status, setStatus] = useState('');
  const copy = async () => {
    input.current?.select();
    try {
      await navigator.clipboard.writeText(value);
      setStatus('Copied to the clipboard.');
    } catch {
      // No clipboard access (a page served without HTTPS, or permission refused): the text is selected.
      setStatus('Copying is not allowed here: the text is selected, press Ctrl+C (⌘C on a Mac) to copy it.');
    }
  };
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
