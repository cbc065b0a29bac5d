import { useId, useRef } from 'react';
import { useFieldError, useRegisterField } from '../../components/form';
import { eventTypes } from './event-types';

/** A subscription being edited: every type (`[]` to the API), or the ticked ones. */
export interface EventsChoice {
  all: boolean;
  types: string[];
}

export function eventsChoiceOf(events: string[]): EventsChoice {
  return { all: events.length === 0, types: events };
}

/** The `events` of a request; undefined when the choice is incomplete (no type ticked). */
export function eventsOf(choice: EventsChoice): string[] | undefined {
  if (choice.all) return [];
  return choice.types.length > 0 ? choice.types : undefined;
}

/** The event types of an endpoint: every one, or those ticked. An error naming `events` is shown here. */
export function EventsField({ value, onChange }: { value: EventsChoice; onChange(value: EventsChoice): void }) {
  const id = useId();
  const group = useRef<HTMLFieldSetElement>(null);
  useRegisterField('events', group);
  const error = useFieldError('events', 'Events');
  const toggle = (type: string, checked: boolean) =>
    onChange({ all: false, types: checked ? [...value.types, type] : value.types.filter((candidate) => candidate !== type) });
  return (
    <fieldset
      ref={group}
      name="events"
      tabIndex={-1}
      className={error ? 'field-group invalid' : 'field-group'}
      aria-invalid={error ? true : undefined}
      aria-describedby={error ? `${id}-error` : undefined}
    >
      <legend>Events</legend>
      <div className="field checkbox">
        <input id={`${id}-all`} type="checkbox" checked={value.all} onChange={(event) => onChange({ all: event.target.checked, types: value.types })} />
        <label htmlFor={`${id}-all`}>Every event type, also those added later</label>
      </div>
      {!value.all && (
        <ul className="event-types">
          {eventTypes.map(({ type, when }) => (
            <li key={type} className="field checkbox">
              <input id={`${id}-${type}`} type="checkbox" checked={value.types.includes(type)} onChange={(event) => toggle(type, event.target.checked)} />
              <label htmlFor={`${id}-${type}`}>
                <code>{type}</code> <span className="hint">{when}</span>
              </label>
            </li>
          ))}
        </ul>
      )}
      {error && (
        <p id={`${id}-error`} className="field-error">
          {error}
        </p>
      )}
    </fieldset>
  );
}
