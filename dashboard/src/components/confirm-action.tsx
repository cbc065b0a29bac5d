import { type ReactNode, useEffect, useRef, useState } from 'react';
import { Form } from './form';

export interface ConfirmActionProps {
  /** The button's text (`Remove`, `Revoke`), and the confirmation's accessible name. */
  label: string;
  /** What it acts on (`the invitation of grace@example.com`): read to screen readers after the label, where a row has many such buttons. */
  target?: string;
  /** What will happen, asked before it does. */
  question: ReactNode;
  /** The confirming button's text (default: `label`). */
  confirmLabel?: string;
  /** Runs the action; a rejection is shown in words under the question. */
  onConfirm(): Promise<void>;
  /** A destructive action (the default): the buttons are styled as one. */
  danger?: boolean;
}

/**
 * A button whose action asks first, in place: the question with a confirming button and Cancel.
 * The focus follows (to the question, and back to the button on Cancel), so it works from the
 * keyboard, and no browser dialog interrupts.
 */
export function ConfirmAction({ label, target, question, confirmLabel, onConfirm, danger = true }: ConfirmActionProps) {
  const [asking, setAsking] = useState(false);
  const [returnFocus, setReturnFocus] = useState(false);
  const button = useRef<HTMLButtonElement>(null);
  const prompt = useRef<HTMLDivElement>(null);

  useEffect(() => {
    if (asking) prompt.current?.focus();
    else if (returnFocus) button.current?.focus();
  }, [asking, returnFocus]);

  if (!asking) {
    return (
      <button ref={button} type="button" className={danger ? 'button danger-outline' : 'button'} onClick={() => setAsking(true)}>
        {label}
        {target && <span className="visually-hidden"> {target}</span>}
      </button>
    );
  }
  const cancel = () => {
    setReturnFocus(true);
    setAsking(false);
  };
  return (
    <div ref={prompt} className="confirm-action" tabIndex={-1}>
      <Form
        onSubmit={async () => {
          await onConfirm();
          setAsking(false);
        }}
        submitLabel={confirmLabel ?? label}
        danger={danger}
        label={target ? `${label} ${target}` : label}
        actions={
          <button type="button" className="button" onClick={cancel}>
            Cancel
          </button>
        }
      >
        <p className="confirm-question">{question}</p>
      </Form>
    </div>
  );
}
