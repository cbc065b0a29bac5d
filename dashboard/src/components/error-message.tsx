import { APIConnectionError, APITimeoutError, SwitchboardError } from '@switchboard/sdk';

/** What went wrong, in words a person can act on. */
export function describeError(error: unknown): string {
  // The SDK's connection failure (after its retries): no answer arrived; a timeout keeps its own words.
  if (error instanceof APIConnectionError && !(error instanceof APITimeoutError)) return 'The server could not be reached. Check the connection and try again.';
  if (error instanceof SwitchboardError) {
    if (error.status === 429 && error.retryAfter !== null) return `${error.message} Try again in ${error.retryAfter} seconds.`;
    return error.message;
  }
  // fetch rejects with a TypeError when the request never got an answer.
  if (error instanceof TypeError) return 'The server could not be reached. Check the connection and try again.';
  return error instanceof Error ? error.message : String(error);
}

/** An error of the API (or of the network) as an alert: the message, and the request id to quote. */
export function ErrorMessage({ error }: { error: unknown }) {
  const requestId = error instanceof SwitchboardError ? error.requestId : null;
  return (
    <div className="error-message" role="alert">
      <p>{describeError(error)}</p>
      {requestId && (
        <p className="request-id">
          Request id <code>{requestId}</code>
        </p>
      )}
    </div>
  );
}
