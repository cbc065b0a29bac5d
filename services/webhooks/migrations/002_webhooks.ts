import type { Knex } from '@switchboard/runtime/db';

/**
 * Endpoints, the events they receive, and the deliveries that are also the work queue: a
 * delivery is due when `next_attempt_at` has passed and nobody holds its lease.
 */
export async function up(knex: Knex): Promise<void> {
  // A `key_alert` target is a key's alert URL (key.spend_alert): it shares the queue, the
  // concurrency limit and the circuit breaker of endpoints, but is never listed and never
  // disabled here (its URL and secret belong to the keys service).
  await knex.raw(`
    CREATE TABLE endpoints (
      id text PRIMARY KEY,
      kind text NOT NULL DEFAULT 'webhook' CHECK (kind IN ('webhook', 'key_alert')),
      workspace_id text NOT NULL,
      url text NOT NULL,
      -- Empty: every event type.
      events text[] NOT NULL DEFAULT '{}',
      description text NULL,
      enabled boolean NOT NULL DEFAULT true,
      disabled_reason text NULL CHECK (disabled_reason IN ('manual', 'endpoint_gone', 'failing', 'organization_deleted')),
      disabled_at timestamptz NULL,
      failing_since timestamptz NULL,
      -- whsec_… under the data keys (it must sign, so it cannot be hashed).
      secret_encrypted text NULL,
      previous_secret_encrypted text NULL,
      previous_secret_expires_at timestamptz NULL,
      created_by text NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CHECK (enabled = (disabled_reason IS NULL)),
      CHECK (kind = 'key_alert' OR secret_encrypted IS NOT NULL)
    )`);
  await knex.raw(`CREATE INDEX endpoints_workspace_page_idx ON endpoints (workspace_id, created_at DESC, id DESC) WHERE kind = 'webhook'`);

  // The body of an event as every endpoint receives it, stored once: every attempt sends the
  // same bytes, so a receiver's signature check and deduplication see one message.
  await knex.raw(`
    CREATE TABLE events (
      id text PRIMARY KEY,
      type text NOT NULL,
      workspace_id text NOT NULL,
      occurred_at timestamptz NOT NULL,
      body text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);

  await knex.raw(`
    CREATE TABLE deliveries (
      id text PRIMARY KEY,
      endpoint_id text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
      event_id text NOT NULL REFERENCES events (id),
      event_type text NOT NULL,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed', 'exhausted')),
      attempt_count integer NOT NULL DEFAULT 0,
      -- Attempts that count against the retry schedule (manual ones do not).
      scheduled_attempts integer NOT NULL DEFAULT 0,
      -- The trigger of the next attempt: event, retry, manual or test.
      next_trigger text NOT NULL DEFAULT 'event' CHECK (next_trigger IN ('event', 'retry', 'manual', 'test')),
      -- Null: nothing to send (succeeded or exhausted).
      next_attempt_at timestamptz NULL,
      leased_until timestamptz NULL,
      lease_token text NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      succeeded_at timestamptz NULL,
      CONSTRAINT deliveries_endpoint_event_key UNIQUE (endpoint_id, event_id)
    )`);
  await knex.raw('CREATE INDEX deliveries_due_idx ON deliveries (endpoint_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL AND leased_until IS NULL');
  await knex.raw('CREATE INDEX deliveries_page_idx ON deliveries (endpoint_id, created_at DESC, id DESC)');
  await knex.raw('CREATE INDEX deliveries_lease_idx ON deliveries (leased_until) WHERE leased_until IS NOT NULL');
  await knex.raw('CREATE INDEX deliveries_event_idx ON deliveries (event_id)');

  await knex.raw(`
    CREATE TABLE attempts (
      id text PRIMARY KEY,
      delivery_id text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
      url text NOT NULL,
      status text NOT NULL CHECK (status IN ('success', 'failed')),
      response_status_code integer NOT NULL,
      error_class text NULL CHECK (error_class IN ('dns', 'connect', 'tls', 'timeout', 'blocked_address', 'http')),
      duration_ms integer NOT NULL,
      response_body text NULL,
      trigger text NOT NULL CHECK (trigger IN ('event', 'retry', 'manual', 'test')),
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
  await knex.raw('CREATE INDEX attempts_delivery_idx ON attempts (delivery_id, created_at, id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('attempts').dropTableIfExists('deliveries').dropTableIfExists('events').dropTableIfExists('endpoints');
}
