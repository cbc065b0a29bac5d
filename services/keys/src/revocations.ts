import type { EventEnvelopeJson } from '@switchboard/runtime/consumer';
import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import type { PgNotifier } from '@switchboard/runtime/pg-notifications';
import type { EventWriter } from '@switchboard/runtime/service';
import { type RevocationScope, revokeKeys } from './store/keys.js';

/**
 * Keys revoked because of identity's events (SPEC §3): a deactivated user's keys everywhere, a
 * removed member's keys in that organization only, a deleted organization's keys. Each handler
 * runs in the consumer's transaction (the event id is recorded there: a redelivery changes
 * nothing) and revokes only keys still active, so replays and overlaps (a deactivation also
 * removes memberships) emit one `key.revoked` per key.
 */

export interface RevocationsDeps {
  log: Logger;
  recordEvent: EventWriter;
  notifier: PgNotifier;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

export class Revocations {
  constructor(private readonly deps: RevocationsDeps) {}

  /** `user.deactivated`: the user's keys in every workspace. */
  userDeactivated(trx: Knex.Transaction, event: EventEnvelopeJson): Promise<void> {
    const userId = text(event.data.user_id);
    return this.revoke(trx, event, userId && { createdBy: userId }, { by: null, reason: 'user_deactivated' });
  }

  /** `organization.member.removed`: the member's keys in that organization only. */
  memberRemoved(trx: Knex.Transaction, event: EventEnvelopeJson): Promise<void> {
    const orgId = text(event.data.org_id);
    const userId = text(event.data.user_id);
    return this.revoke(trx, event, orgId && userId && { workspaceId: orgId, createdBy: userId }, {
      by: text(event.data.removed_by) ?? null,
      reason: 'member_removed',
    });
  }

  /** `organization.deleted`: every key of the organization. */
  organizationDeleted(trx: Knex.Transaction, event: EventEnvelopeJson): Promise<void> {
    const orgId = text(event.data.org_id);
    return this.revoke(trx, event, orgId && { workspaceId: orgId }, { by: text(event.data.deleted_by) ?? null, reason: 'organization_deleted' });
  }

  private async revoke(
    trx: Knex.Transaction,
    event: EventEnvelopeJson,
    scope: RevocationScope | undefined | '',
    revocation: { by: string | null; reason: string },
  ): Promise<void> {
    if (!scope) {
      this.deps.log.error({ event_id: event.event_id, type: event.type }, 'ignored an event without the ids it needs');
      return;
    }
    const revoked = await revokeKeys(trx, scope, revocation);
    for (const key of revoked) {
      await this.deps.recordEvent(trx, {
        type: 'key.revoked',
        workspaceId: key.workspace_id,
        data: { key_id: key.id, workspace_id: key.workspace_id, revoked_by: revocation.by, reason: revocation.reason },
        requestId: event.request_id,
      });
    }
    if (revoked.length > 0) {
      this.deps.notifier.afterCommit(
        trx,
        revoked.map((key) => `key:${key.id}`),
      );
      this.deps.log.info({ event_id: event.event_id, reason: revocation.reason, key_ids: revoked.map((key) => key.id) }, 'keys revoked');
    }
  }
}
