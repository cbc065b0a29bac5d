import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { KeyCreatedSchema, KeyRotatedSchema, KeyUpdatedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from '@switchboard/runtime/db';
import type { EventWriter } from '@switchboard/runtime/service';
import { copyKeySpendLimits, insertRotatedKey, type KeyRow, updateKey } from './store/keys.js';

/**
 * The writes of a rotation (docs/api/keys.md#rotation), once Keys.rotate has found the old key,
 * checked the caller and the input: the new key with every setting of the old one, the old
 * one's budget and `rotated_from` it; the old key's budgets copied; the old key expiring at the
 * end of the grace period (or sooner, if it already did); and the three events — key.created of
 * the new key, key.rotated, key.updated of the old one (its expiry) — in the caller's transaction.
 */
export async function rotateKey(
  trx: Knex.Transaction,
  recordEvent: EventWriter,
  rotation: {
    old: KeyRow;
    newKey: { id: string; keyHash: string; hint: string; createdBy: string };
    graceSeconds: number;
    now: Date;
    requestId: string;
  },
): Promise<void> {
  const { old, newKey, requestId } = rotation;
  const workspaceId = old.workspace_id;
  const graceEnd = new Date(rotation.now.getTime() + rotation.graceSeconds * 1000);
  const previousExpiresAt = old.expires_at !== null && old.expires_at < graceEnd ? old.expires_at : graceEnd;
  await insertRotatedKey(trx, old, newKey);
  await copyKeySpendLimits(trx, old.id, newKey.id);
  await updateKey(trx, old.id, { expires_at: previousExpiresAt });
  await recordEvent(trx, KeyCreatedSchema, {
    workspaceId,
    data: {
      keyId: newKey.id,
      workspaceId,
      name: old.name,
      hint: newKey.hint,
      createdBy: newKey.createdBy,
      monthlySpendCapUsd: old.monthly_spend_cap_usd ?? undefined,
      routingPolicy: old.routing_policy,
    },
    requestId,
  });
  await recordEvent(trx, KeyRotatedSchema, {
    workspaceId,
    data: { keyId: newKey.id, workspaceId, previousKeyId: old.id, previousExpiresAt: timestampFromDate(previousExpiresAt), rotatedBy: newKey.createdBy },
    requestId,
  });
  await recordEvent(trx, KeyUpdatedSchema, {
    workspaceId,
    data: { keyId: old.id, workspaceId, change: 'rotated', changedFields: ['expires_at'] },
    requestId,
  });
}
