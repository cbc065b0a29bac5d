import {
  KeyRevokedSchema,
  type OrganizationDeletedSchema,
  type OrganizationMemberRemovedSchema,
  type UserDeactivatedSchema,
} from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { EventEnvelopeJson, ReceivedEvent } from '@switchboard/runtime/consumer';
import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import type { PgNotifier } from '@switchboard/runtime/pg-notifications';
import type { EventWriter } from '@switchboard/runtime/service';
import { type RevocationScope, revokeKeys } from './store/keys.js';

/**
 * Keys revoked because of identity's events (docs/api/keys.md#revocation): a deactivated user's keys everywhere, a
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

export class Revocations {
  constructor(private readonly deps: RevocationsDeps) {}

  /** `user.deactivated`: the user's keys in every workspace. */
  userDeactivated(trx: Knex.Transaction, event: ReceivedEvent<typeof UserDeactivatedSchema>): Promise<void> {
    const { userId } = event.data;
    return this.revoke(trx, event, userId && { createdBy: userId }, { by: null, reason: 'user_deactivated' });
  }

  /** `organization.member.removed`: the member's keys in that organization only. */
  memberRemoved(trx: Knex.Transaction, event: ReceivedEvent<typeof OrganizationMemberRemovedSchema>): Promise<void> {
    const { orgId, userId, removedBy } = event.data;
    return this.revoke(trx, event, orgId && userId && { workspaceId: orgId, createdBy: userId }, { by: removedBy || null, reason: 'member_removed' });
  }

  /** `organization.deleted`: every key of the organization. */
  organizationDeleted(trx: Knex.Transaction, event: ReceivedEvent<typeof OrganizationDeletedSchema>): Promise<void> {
    const { orgId, deletedBy } = event.data;
    return this.revoke(trx, event, orgId && { workspaceId: orgId }, { by: deletedBy || null, reason: 'organization_deleted' });
  }

  private async revoke(
    trx: Knex.Transaction,
    event: Pick<EventEnvelopeJson, 'event_id' | 'type' | 'request_id'>,
    scope: RevocationScope | undefined | '',
    revocation: { by: string | null; reason: string },
  ): Promise<void> {
    if (!scope) {
      this.deps.log.error({ event_id: event.event_id, type: event.type }, 'ignored an event without the ids it needs');
      return;
    }
    const revoked = await revokeKeys(trx, scope, revocation);
    for (const key of revoked) {
      await this.deps.recordEvent(trx, KeyRevokedSchema, {
        workspaceId: key.workspace_id,
        data: { keyId: key.id, workspaceId: key.workspace_id, revokedBy: revocation.by ?? undefined, reason: revocation.reason },
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
