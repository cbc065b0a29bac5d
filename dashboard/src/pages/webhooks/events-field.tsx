import { useId, useRef } from 'react';
import { useFieldError, useRegisterField } from '../../components/form';
import { Loaded } from '../../components/loaded';
import { type EventType, useEventTypes } from './event-types';

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
  const eventTypes = useEventTypes();
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
        <Loaded state={eventTypes} what="Loading the event types">
          {(catalog) => (
            <ul className="event-types">
              {catalog.map((eventType) => (
                <li key={eventType.type}>
                  <div className="field checkbox">
                    <input
                      id={`${id}-${eventType.type}`}
                      type="checkbox"
                      checked={value.types.includes(eventType.type)}
                      onChange={(event) => toggle(eventType.type, event.target.checked)}
                    />
                    <label htmlFor={`${id}-${eventType.type}`}>
                      <code>{eventType.type}</code> <span className="hint">{eventType.description}</span>
                    </label>
                  </div>
                  <EventTypeDetails eventType={eventType} />
                </li>
              ))}
            </ul>
          )}
        </Loaded>
      )}
      {error && (
        <p id={`${id}-error`} className="field-error">
          {error}
        </p>
      )}
    </fieldset>
  );
}

/** What a delivery of the type looks like: an example body and the JSON Schema it follows, folded away. */
function EventTypeDetails({ eventType }: { eventType: EventType }) {
  return (
    <details className="event-type-details">
      <summary>
        Example and schema<span className="visually-hidden"> of {eventType.type}</span>
      </summary>
      <p className="detail-label">Example body</p>
      <pre className="metadata">{JSON.stringify(eventType.example, null, 2)}</pre>
      <p className="detail-label">JSON Schema</p>
      <pre className="metadata">{JSON.stringify(eventType.schema, null, 2)}</pre>
    </details>
  );
}
