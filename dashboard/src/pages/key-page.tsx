import { Loaded } from '../components/loaded';
import { Page } from '../components/page';
import { Section } from '../components/section';
import { formatDateTime } from '../format';
import { can } from '../permissions';
import { Link } from '../router';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { AlertWebhookSection } from './keys/alert-webhook-section';
import { AllowedModelsSection } from './keys/allowed-models-section';
import { BudgetsSection } from './keys/budgets-section';
import { ExpirySection } from './keys/expiry-section';
import { scopesLabel } from './keys/key-words';
import { type Key, KeyStatus } from './keys/keys-section';
import { NameSection } from './keys/name-section';
import { RateLimitsSection } from './keys/rate-limits-section';
import { RevokeSection } from './keys/revoke-section';
import { RotateSection } from './keys/rotate-section';
import { RoutingSection } from './keys/routing-section';
import { ScopesSection } from './keys/scopes-section';
import { SpendBar } from './keys/spend-bar';

/** What the sections of an active key's page get: the key, whether the user may change it, and what to call after a change. */
export interface KeySectionProps {
  keyRecord: Key;
  canManage: boolean;
  onChanged(): void;
}

/**
 * One key: its facts and month-to-date spend, and its settings (name, scopes, expiry, allowed
 * models, rate limits, budgets, spend alerts, routing, rotation, revocation). The settings can be changed by the key's creator, and by owners and
 * admins for any key; a revoked key is read-only.
 */
export function KeyPage({ params }: { params: Record<string, string> }) {
  const { client, account, role } = useSignedIn();
  const key = useLoad(() => client.get('/v1/keys/{key_id}', { params: { path: { key_id: params.keyId } } }), [client, params.keyId]);
  return (
    <Page title={key.status === 'done' ? `Key ${key.data.name}` : 'Key'}>
      <p>
        <Link to="/keys">All keys</Link>
      </p>
      <Loaded state={key} what="Loading the key">
        {(keyRecord) => {
          const own = keyRecord.created_by === account.user_id;
          const active = keyRecord.status === 'active';
          const props = { keyRecord, canManage: active && can(role, 'keys.manage', own), onChanged: key.reload };
          return (
            <>
              <Section title="Overview">
                <dl className="facts">
                  <dt>Key</dt>
                  <dd>
                    <code>{keyRecord.hint}</code> <span className="muted">(the full key was shown once, when it was created)</span>
                  </dd>
                  <dt>Status</dt>
                  <dd>
                    <KeyStatus keyRecord={keyRecord} />
                    {keyRecord.revoked_at && ` since ${formatDateTime(keyRecord.revoked_at)}`}
                  </dd>
                  <dt>Scopes</dt>
                  <dd>{scopesLabel(keyRecord.scopes)}</dd>
                  <dt>Expires</dt>
                  <dd>{keyRecord.expires_at ? formatDateTime(keyRecord.expires_at) : 'Never'}</dd>
                  {keyRecord.rotated_from && (
                    <>
                      <dt>Rotated from</dt>
                      <dd>
                        <Link to={`/keys/${keyRecord.rotated_from}`}>the previous key</Link>
                      </dd>
                    </>
                  )}
                  <dt>Spend this month</dt>
                  <dd>
                    <SpendBar spend={keyRecord.month_to_date_spend_usd} cap={keyRecord.monthly_spend_cap_usd} />
                  </dd>
                  <dt>Created</dt>
                  <dd>
                    {formatDateTime(keyRecord.created_at)} by {own ? 'you' : <code>{keyRecord.created_by}</code>}
                  </dd>
                  <dt>Last used</dt>
                  <dd>{keyRecord.last_used_at ? formatDateTime(keyRecord.last_used_at) : 'Never'}</dd>
                </dl>
                {!props.canManage && (
                  <p className="muted">
                    {active
                      ? `Only the key's creator, or an owner or admin of the workspace, can change it; your role is ${role}.`
                      : 'A revoked key is refused everywhere and can no longer be changed; it stays listed for audit.'}
                  </p>
                )}
              </Section>
              <NameSection {...props} />
              <ScopesSection {...props} />
              <ExpirySection {...props} />
              <AllowedModelsSection {...props} />
              <RateLimitsSection {...props} />
              <BudgetsSection {...props} />
              <AlertWebhookSection {...props} />
              <RoutingSection {...props} />
              {props.canManage && <RotateSection {...props} />}
              {props.canManage && <RevokeSection {...props} />}
            </>
          );
        }}
      </Loaded>
    </Page>
  );
}
