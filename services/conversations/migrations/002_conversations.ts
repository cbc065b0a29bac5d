import type { Knex } from '@switchboard/runtime/db';

/**
 * Conversations and their messages, feedback on generations, the generations known from
 * billing's events, and the per-(tier, model) feedback counts routing samples from.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE conversations (
      id text PRIMARY KEY,
      workspace_id text NOT NULL,
      title text NULL,
      -- json, not jsonb: the object comes back as it was sent, keys in their order.
      metadata json NOT NULL DEFAULT '{}',
      -- The position of the last message: appends lock the row and take the next one.
      message_count bigint NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
  await knex.raw('CREATE INDEX conversations_workspace_page_idx ON conversations (workspace_id, created_at DESC, id DESC)');

  await knex.raw(`
    CREATE TABLE messages (
      id text PRIMARY KEY,
      conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
      position bigint NOT NULL,
      role text NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
      content text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT messages_position_key UNIQUE (conversation_id, position)
    )`);

  // What feedback needs of a generation: its workspace, tier and the model that served it.
  await knex.raw(`
    CREATE TABLE generations (
      generation_id text PRIMARY KEY,
      workspace_id text NOT NULL,
      tier text NOT NULL,
      model text NOT NULL,
      occurred_at timestamptz NOT NULL
    )`);

  await knex.raw(`
    CREATE TABLE feedback (
      id text PRIMARY KEY,
      workspace_id text NOT NULL,
      generation_id text NOT NULL REFERENCES generations (generation_id),
      rating smallint NOT NULL CHECK (rating IN (1, -1)),
      comment text NULL,
      tags text[] NOT NULL DEFAULT '{}',
      tier text NOT NULL,
      model text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT feedback_generation_key UNIQUE (workspace_id, generation_id)
    )`);
  await knex.raw('CREATE INDEX feedback_workspace_time_idx ON feedback (workspace_id, updated_at)');

  await knex.raw(`
    CREATE TABLE routing_scores (
      tier text NOT NULL,
      model text NOT NULL,
      thumbs_up bigint NOT NULL DEFAULT 0 CHECK (thumbs_up >= 0),
      thumbs_down bigint NOT NULL DEFAULT 0 CHECK (thumbs_down >= 0),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tier, model)
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema
    .dropTableIfExists('routing_scores')
    .dropTableIfExists('feedback')
    .dropTableIfExists('generations')
    .dropTableIfExists('messages')
    .dropTableIfExists('conversations');
}
