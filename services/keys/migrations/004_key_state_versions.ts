import type { Knex } from '@switchboard/runtime/db';

/**
 * `api_keys.state_version`: what ListKeyStates pages by (docs/money-path.md#replicas). A replica
 * asks for the versions after the highest it holds, so a version must never become visible after
 * a higher one: a version taken by a transaction that commits late would be skipped for good.
 * The version is therefore assigned at commit (a deferred trigger) under a transaction-level
 * advisory lock, so versions are visible in the order they are taken. Taking the lock last, when
 * every row lock of the transaction is held already, means it cannot close a deadlock cycle.
 * Every change of a row bumps it except the use mark (`last_used_at`, written once a minute per
 * key in use) and `updated_at`, so a column added later counts without touching this trigger.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE SEQUENCE api_keys_state_version_seq');
  // The volatile default gives every existing row a version of its own.
  await knex.raw(`ALTER TABLE api_keys ADD COLUMN state_version bigint NOT NULL DEFAULT nextval('api_keys_state_version_seq')`);
  await knex.raw('CREATE UNIQUE INDEX api_keys_state_version_idx ON api_keys (state_version)');
  await knex.raw(`
    CREATE FUNCTION api_keys_bump_state_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtext(TG_TABLE_SCHEMA || '.api_keys.state_version'));
      UPDATE api_keys SET state_version = nextval('api_keys_state_version_seq') WHERE id = NEW.id;
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE CONSTRAINT TRIGGER api_keys_state_version_on_insert AFTER INSERT ON api_keys
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION api_keys_bump_state_version()`);
  await knex.raw(`
    CREATE CONSTRAINT TRIGGER api_keys_state_version_on_update AFTER UPDATE ON api_keys
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
      WHEN ((to_jsonb(OLD) - 'state_version' - 'last_used_at' - 'updated_at') IS DISTINCT FROM (to_jsonb(NEW) - 'state_version' - 'last_used_at' - 'updated_at'))
      EXECUTE FUNCTION api_keys_bump_state_version()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER api_keys_state_version_on_update ON api_keys');
  await knex.raw('DROP TRIGGER api_keys_state_version_on_insert ON api_keys');
  await knex.raw('DROP FUNCTION api_keys_bump_state_version()');
  await knex.raw('ALTER TABLE api_keys DROP COLUMN state_version');
  await knex.raw('DROP SEQUENCE api_keys_state_version_seq');
}
