import { getOption, hasOption } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { event_type, file_switchboard_events_v1_events } from '../src/gen/switchboard/events/v1/events_pb.js';
import { natsRoles } from '../src/nats-permissions.js';

/** The table of what each component does on NATS (docs/operations.md#nats-credentials) against the event catalog of events.proto. */
const eventTypes = file_switchboard_events_v1_events.messages
  .filter((message) => hasOption(message, event_type))
  .map((message) => getOption(message, event_type));
const roles = Object.values(natsRoles);

describe('natsRoles', () => {
  it('names only event types of events.proto', () => {
    const named = roles.flatMap((role) => [...role.produces, ...role.consumes]);
    expect(named.filter((type) => !eventTypes.includes(type))).toEqual([]);
  });

  it('gives every event type a producer, except the test event (sent to one endpoint, never through the stream)', () => {
    const produced = new Set(roles.flatMap((role) => role.produces));
    expect(eventTypes.filter((type) => !produced.has(type))).toEqual(['webhook.test']);
  });

  it('consumes only what some component produces', () => {
    const produced = new Set(roles.flatMap((role) => role.produces));
    expect(roles.flatMap((role) => role.consumes).filter((type) => !produced.has(type))).toEqual([]);
  });
});
