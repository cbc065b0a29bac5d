import type { Knex } from 'knex';

/**
 * The audit log (docs/api/audit.md): one row per `audit.recorded` event of any service, kept by
 * identity. Append-only twice over:
 * - a trigger refuses every UPDATE, and any DELETE of a row younger than 365 days, whoever asks
 *   (the owner included; only the retention sweeper's deletes of older rows pass);
 * - the identity process reads and inserts records as `switchboard_audit_writer`, a NOLOGIN role
 *   holding only SELECT and INSERT on the table (SET ROLE: a superuser setup is held to it too).
 * The role is cluster-wide (roles are): created once, by whichever schema's migration comes first;
 * an advisory lock serializes the migrations of several schemas (tests, in-process suites).
 */

export const auditWriterRole = 'switchboard_audit_writer';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE audit_events (
      id text PRIMARY KEY,
      workspace_id text NOT NULL,
      action text NOT NULL,
      actor_type text NOT NULL CHECK (actor_type IN ('user', 'api_key', 'system')),
      actor_id text NOT NULL DEFAULT '',
      actor_ip text NULL,
      target_type text NULL,
      target_id text NULL,
      outcome text NOT NULL CHECK (outcome IN ('success', 'denied', 'failed')),
      metadata jsonb NOT NULL DEFAULT '{}',
      request_id text NULL,
      subject_user_id text NULL,
      producer text NOT NULL,
      created_at timestamptz NOT NULL
    )`);
  // The list (newest first, keyset) and its filters, all within one workspace.
  await knex.raw('CREATE INDEX audit_events_workspace_idx ON audit_events (workspace_id, created_at DESC, id DESC)');
  await knex.raw('CREATE INDEX audit_events_action_idx ON audit_events (workspace_id, action, created_at DESC, id DESC)');
  // The actor filter and the data export (`subject_user_id = ? OR actor_id = ?`).
  await knex.raw('CREATE INDEX audit_events_actor_idx ON audit_events (actor_id, created_at DESC, id DESC)');
  await knex.raw('CREATE INDEX audit_events_subject_idx ON audit_events (subject_user_id) WHERE subject_user_id IS NOT NULL');
  // The retention sweeper.
  await knex.raw('CREATE INDEX audit_events_created_idx ON audit_events (created_at)');

  await knex.raw(`
    CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'audit_events is append-only: a record is never changed' USING ERRCODE = 'insufficient_privilege';
      END IF;
      IF OLD.created_at > now() - interval '365 days' THEN
        RAISE EXCEPTION 'audit_events keeps every record at least 365 days: % is younger', OLD.id USING ERRCODE = 'insufficient_privilege';
      END IF;
      RETURN OLD;
    END $$`);
  await knex.raw('CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()');
  await knex.raw(`
    CREATE FUNCTION audit_events_no_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'audit_events is append-only: it is never truncated' USING ERRCODE = 'insufficient_privilege';
    END $$`);
  await knex.raw('CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events FOR EACH STATEMENT EXECUTE FUNCTION audit_events_no_truncate()');

  // The role, once per cluster, whichever migration gets here first (held until this migration commits).
  await knex.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [auditWriterRole]);
  await knex.raw(`
    DO $$
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${auditWriterRole}') THEN
        BEGIN
          CREATE ROLE ${auditWriterRole} NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
          NULL; -- created meanwhile by a migration that did not take the lock
        END;
      END IF;
      -- The migrating role (the service's) may SET ROLE to it; a superuser may anyway.
      IF NOT pg_has_role(current_user, '${auditWriterRole}', 'MEMBER') THEN
        EXECUTE format('GRANT ${auditWriterRole} TO %I', current_user);
      END IF;
    END $$`);
  const schema = await currentSchema(knex);
  await knex.raw(`GRANT USAGE ON SCHEMA ?? TO ${auditWriterRole}`, [schema]);
  await knex.raw(`GRANT SELECT, INSERT ON audit_events TO ${auditWriterRole}`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE IF EXISTS audit_events');
  await knex.raw('DROP FUNCTION IF EXISTS audit_events_append_only()');
  await knex.raw('DROP FUNCTION IF EXISTS audit_events_no_truncate()');
  const schema = await currentSchema(knex);
  await knex.raw(`REVOKE USAGE ON SCHEMA ?? FROM ${auditWriterRole}`, [schema]);
  // The role stays: other schemas (and databases) of the cluster may use it.
}

async function currentSchema(knex: Knex): Promise<string> {
  const { rows } = await knex.raw<{ rows: Array<{ schema: string }> }>('SELECT current_schema() AS schema');
  return rows[0].schema;
}
