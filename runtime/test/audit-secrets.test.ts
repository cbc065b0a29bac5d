import { describe, expect, it } from 'vitest';
import { generateFullKey } from '../src/api-key-format.js';
import { newId, newSigningSecret, newToken } from '../src/ids.js';
import { findSecretsInAuditRows } from './audit-secrets.js';

/** The suite-wide secrets check of the audit log (global-setup's teardown): what it finds, and what it lets pass. */

const record = (metadata: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id: newId('aud'),
  workspace_id: newId('ws'),
  action: 'key.created',
  actor_type: 'user',
  actor_id: newId('usr'),
  actor_ip: '203.0.113.7',
  target_type: 'api_key',
  target_id: newId('key'),
  outcome: 'success',
  metadata,
  request_id: newId('req'),
  subject_user_id: newId('usr'),
  producer: 'keys',
  created_at: new Date(),
  ...extra,
});

describe('the audit secrets check', () => {
  it('lets ordinary records pass: ids, codes, field names, counts, hex hashes', () => {
    const rows = [
      record({ name: 'ci', changed_fields: 'name,scopes', sessions: 3, reason: 'wrong_password', hint: 'sb_…abcd' }),
      record({ reason: 'insufficient_scope', rpc: 'CreateTopup', amount_usd: '100.00', digest: 'a'.repeat(64) }),
      record({}, { target_type: null, target_id: null, actor_ip: null }),
    ];
    expect(findSecretsInAuditRows(rows)).toEqual([]);
  });

  it('finds every kind of secret, naming the record', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ key: generateFullKey() }, 'a full API key'],
      [{ token: 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ1c3IifQ.c2lnbmF0dXJl' }, 'a JWT'],
      [{ secret: newSigningSecret() }, 'a webhook signing secret'],
      [{ note: `refresh ${newToken()}` }, 'a refresh, reset, verification, invitation or sign-in token'],
      [{ mfa: `mfa_${newToken()}` }, 'a refresh, reset, verification, invitation or sign-in token'],
      [{ code: 'ab3de-fgh2j-klm4n-pq5rs-tuv6w' }, 'a recovery code'],
      [{ code: '042137' }, 'a TOTP-looking code'],
      [{ seed: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' }, 'a TOTP secret'],
      [{ password: 'correct horse battery 7 staple' }, 'a test password'],
    ];
    for (const [metadata, kind] of cases) {
      const row = record(metadata);
      expect(findSecretsInAuditRows([row]), kind).toContainEqual({ id: row.id, action: 'key.created', producer: 'keys', kind });
    }
  });
});
