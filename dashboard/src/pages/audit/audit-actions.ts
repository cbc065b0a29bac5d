import type { AuditAction } from '../../closed-sets';

/**
 * The label of every action (docs/api/audit.md#actions), in the filter's order: what a person did,
 * then what the platform did. Keyed by AuditAction, so an action added to the catalogue without a
 * label here does not compile.
 */
const labels: Record<AuditAction, string> = {
  'user.signed_in': 'Signed in',
  'user.sign_in_failed': 'Sign-in failed',
  'user.sign_in_throttled': 'Sign-in throttled',
  'user.two_factor_enabled': 'Two-factor authentication turned on',
  'user.two_factor_disabled': 'Two-factor authentication turned off',
  'user.recovery_codes_regenerated': 'Recovery codes regenerated',
  'user.password_changed': 'Password changed',
  'user.password_reset': 'Password reset',
  'session.revoked': 'Sessions revoked',
  'member.invited': 'Member invited',
  'member.joined': 'Member joined',
  'member.removed': 'Member removed',
  'member.role_changed': "Member's role changed",
  'organization.ownership_transferred': 'Ownership transferred',
  'organization.deleted': 'Organization deleted',
  'key.created': 'Key created',
  'key.updated': 'Key updated',
  'key.rotated': 'Key rotated',
  'key.revoked': 'Key revoked',
  'spend_limits.updated': 'Spend limits changed',
  'webhook.created': 'Webhook created',
  'webhook.updated': 'Webhook updated',
  'webhook.deleted': 'Webhook deleted',
  'webhook.secret_rotated': "Webhook's secret rotated",
  'topup.completed': 'Top-up completed',
  'access.denied': 'Access denied',
  'account.export_requested': 'Data export requested',
};

/** The actions with their labels, for the filter's options. */
export const auditActions = (Object.entries(labels) as [AuditAction, string][]).map(([value, label]) => ({ value, label }));

/** The badge of an outcome: success, denied or failed. */
export const outcomeBadges: Record<string, string> = { success: 'badge ok', denied: 'badge bad', failed: 'badge warn' };
