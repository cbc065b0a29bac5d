import { SwitchboardError } from '@switchboard/sdk';

/** Where an API error's `field` points in a form: the input's name, and the words that stand for the API's path in the message. */
export interface FieldTarget {
  /** The `name` of the form's input. */
  field: string;
  /** What replaces the API's path in the message (default: `field`, which the input then words by its label). */
  mention?: string;
}

/**
 * An API error whose `field` is a path into a value the form sends differently from how it
 * shows it (`spend_limits[1].amount_usd` of a list built from the filled inputs only,
 * `allowed_models[3]` of a list typed one per line), moved to the input that holds it: `target`
 * maps the path to that input (undefined: left as it is). Anything else is given back as it is.
 */
export function retargetFieldError(error: unknown, target: (field: string) => FieldTarget | undefined): unknown {
  if (!(error instanceof SwitchboardError) || !error.field) return error;
  const moved = target(error.field);
  if (!moved) return error;
  return new SwitchboardError({
    status: error.status,
    code: error.code,
    message: error.message.split(error.field).join(moved.mention ?? moved.field),
    field: moved.field,
    requestId: error.requestId,
    metadata: error.metadata,
    retryAfter: error.retryAfter,
    body: error.body,
  });
}

/** `name[i]` or `name[i].rest` of an error's field: the index, or undefined for another field. */
export function indexInList(field: string, name: string): number | undefined {
  const match = /^(.+?)\[(\d+)\](?:\..+)?$/.exec(field);
  return match && match[1] === name ? Number(match[2]) : undefined;
}
