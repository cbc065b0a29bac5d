import { useState } from 'react';

/**
 * Copying `value` to the clipboard from a Copy button: `copy()` for its onClick, and `status`,
 * the line that says whether it worked (shown in a role=status element). `select()` selects the
 * text on screen first, so that without clipboard access (a page served without HTTPS, or
 * permission refused) Ctrl+C copies it.
 */
export function useCopy(value: string, select?: () => void): { copy(): Promise<void>; status: string } {
  const [status, setStatus] = useState('');
  const copy = async () => {
    select?.();
    try {
      await navigator.clipboard.writeText(value);
      setStatus('Copied to the clipboard.');
    } catch {
      setStatus('Copying is not allowed here: the text is selected, press Ctrl+C (⌘C on a Mac) to copy it.');
    }
  };
  return { copy, status };
}
