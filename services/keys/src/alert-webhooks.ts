import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ResolveAlertWebhookResponseSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import type { Knex } from '@switchboard/runtime/db';
import type { DataKeyRing } from '@switchboard/runtime/secrets';
import { alertSecretPurpose } from './keys.js';
import { findAlertWebhook } from './store/keys.js';

/**
 * Where a `key.spend_alert` goes, for the webhooks service at delivery time: the key's alert URL
 * and its signing secret, decrypted. A key without an alert webhook (any more) answers no URL and
 * the alert is dropped.
 */
export class AlertWebhooks {
  constructor(private readonly deps: { db: Knex; dataKeys: DataKeyRing }) {}

  async resolve(keyId: string): Promise<MessageInitShape<typeof ResolveAlertWebhookResponseSchema>> {
    const row = await findAlertWebhook(this.deps.db, keyId);
    if (!row?.alert_webhook_url || !row.alert_signing_secret_encrypted) return {};
    return {
      url: row.alert_webhook_url,
      signingSecret: this.deps.dataKeys.decrypt(row.alert_signing_secret_encrypted, alertSecretPurpose),
      thresholdPct: row.alert_threshold_pct ?? undefined,
    };
  }
}
