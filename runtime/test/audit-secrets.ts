import pg from 'pg';

/**
 * The suite-wide check of docs/api/audit.md#no-secrets: no audit record holds a password, token, full key, secret or
 * TOTP code. Run by global-setup's teardown over every row of identity.audit_events the whole
 * run wrote (before the database is dropped); a run that booted no mesh has no table: nothing to check.
 */

/** What a secret looks like, by its kind (the shapes the services issue). */
const secretShapes: Array<{ kind: string; pattern: RegExp }> = [
  // runtime/src/api-key-format.ts: `sb_` + 43 random + 6 checksum base62 characters.
  { kind: 'a full API key', pattern: /sb_[0-9A-Za-z]{49}(?![0-9A-Za-z])/ },
  // An access token (or any JWT): three base64url parts, the header's JSON starting `{"`.
  { kind: 'a JWT', pattern: /eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/ },
  { kind: 'a webhook signing secret', pattern: /whsec_/ },
  // runtime/src/ids.ts newToken: 32 random bytes as base64url, 43 characters; refresh, reset,
  // verification and invitation tokens, and `mfa_` + one.
  { kind: 'a refresh, reset, verification, invitation or sign-in token', pattern: /(?<![A-Za-z0-9_-]|mfa_)(mfa_)?[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/ },
  // services/identity/src/two-factor.ts: recovery codes, five groups of five base32 characters.
  { kind: 'a recovery code', pattern: /(?<![a-z2-7])[a-z2-7]{5}(-[a-z2-7]{5}){4}(?![a-z2-7])/i },
  // A TOTP secret (160 bits of base32, as enrolment shows it).
  { kind: 'a TOTP secret', pattern: /(?<![A-Z2-7])[A-Z2-7]{32}(?![A-Z2-7])/ },
  // The passwords of testkit's newUser (mesh.ts) and registerUserWithPassword (gateway-accounts.ts).
  { kind: 'a test password', pattern: /correct horse battery|bench [A-Za-z0-9_-]{16} pass/ },
];

/**
 * A metadata string that is six digits and nothing else looks like a TOTP code (codes travel as
 * strings); a number is a fact such as a duration (`grace_period_seconds: 604800`).
 */
const totpLike = /^\s*\d{6}\s*$/;

/** Audit records were found holding secrets: the run fails. */
export class AuditSecretsError extends Error {}

export interface AuditSecretFinding {
  id: string;
  action: string;
  producer: string;
  kind: string;
}

/** The secrets found in `rows` (each a record of audit_events as selected), one finding per record and kind. */
export function findSecretsInAuditRows(rows: Array<Record<string, unknown>>): AuditSecretFinding[] {
  const findings: AuditSecretFinding[] = [];
  for (const row of rows) {
    const text = JSON.stringify(row);
    const found = (kind: string) => findings.push({ id: String(row.id), action: String(row.action), producer: String(row.producer), kind });
    for (const { kind, pattern } of secretShapes) if (pattern.test(text)) found(kind);
    const metadata = (row.metadata ?? {}) as Record<string, unknown>;
    if (Object.values(metadata).some((value) => typeof value === 'string' && totpLike.test(value))) found('a TOTP-looking code');
  }
  return findings;
}

/**
 * Reads every audit record of the database at `databaseUrl` and throws, naming each record and
 * what it holds, when one holds a secret. Returns how many records were checked (0: none).
 * `outboxes`: also the `audit.recorded` events in every schema's outbox (published ones stay a
 * day), for a test's private database: its service publishes its records to the run's stream,
 * where an identity of another database may consume them, so they may be only there.
 */
export async function checkAuditRecordsForSecrets(databaseUrl: string, options: { outboxes?: boolean } = {}): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const rows: Array<Record<string, unknown>> = [];
    const { rows: tables } = await client.query<{ table: string | null }>("SELECT to_regclass('identity.audit_events')::text AS table");
    if (tables[0]?.table) rows.push(...(await client.query<Record<string, unknown>>('SELECT * FROM identity.audit_events')).rows);
    if (options.outboxes) {
      const { rows: outboxes } = await client.query<{ schema: string }>(
        "SELECT table_schema AS schema FROM information_schema.tables WHERE table_name = 'outbox' ORDER BY table_schema",
      );
      for (const { schema } of outboxes) {
        const { rows: events } = await client.query<{ payload: { event_id: string; producer: string; data: Record<string, unknown> } }>(
          `SELECT payload FROM ${client.escapeIdentifier(schema)}.outbox WHERE payload->>'type' = 'audit.recorded'`,
        );
        // The record as identity would store it: the event's data, named by the event's id.
        rows.push(...events.map(({ payload }) => ({ ...payload.data, id: payload.event_id, producer: payload.producer })));
      }
    }
    const findings = findSecretsInAuditRows(rows);
    if (findings.length > 0) {
      const lines = findings.map((f) => `  ${f.id} (${f.action}, written by ${f.producer}): ${f.kind}`);
      throw new AuditSecretsError(
        `audit records hold secrets (docs/api/audit.md#no-secrets: never a password, token, full key, secret or code):\n${lines.join('\n')}`,
      );
    }
    return rows.length;
  } finally {
    await client.end();
  }
}
