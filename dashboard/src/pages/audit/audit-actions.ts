/** The audit log's actions (docs/api/audit.md), in the filter's order: what a person did, then what the platform did. */
export const auditActions: { value: string; label: string }[] = [
  { value: 'user.signed_in', label: 'Signed in' },
  { value: 'user.sign_in_failed', label: 'Sign-in failed' },
  { value: 'user.sign_in_throttled', label: 'Sign-in throttled' },
  { value: 'user.two_factor_enabled', label: 'Two-factor authentication turned on' },
  { value: 'user.two_factor_disabled', label: 'Two-factor authentication turned off' },
  { value: 'user.password_changed', label: 'Password changed' },
  { value: 'user.password_reset', label: 'Password reset' },
  { value: 'session.revoked', label: 'Sessions revoked' },
  { value: 'member.invited', label: 'Member invited' },
  { value: 'member.joined', label: 'Member joined' },
  { value: 'member.removed', label: 'Member removed' },
  { value: 'member.role_changed', label: "Member's role changed" },
  { value: 'organization.ownership_transferred', label: 'Ownership transferred' },
  { value: 'organization.deleted', label: 'Organization deleted' },
  { value: 'key.created', label: 'Key created' },
  { value: 'key.updated', label: 'Key updated' },
  { value: 'key.rotated', label: 'Key rotated' },
  { value: 'key.revoked', label: 'Key revoked' },
  { value: 'spend_limits.updated', label: 'Spend limits changed' },
  { value: 'webhook.created', label: 'Webhook created' },
  { value: 'webhook.updated', label: 'Webhook updated' },
  { value: 'webhook.deleted', label: 'Webhook deleted' },
  { value: 'webhook.secret_rotated', label: "Webhook's secret rotated" },
  { value: 'topup.completed', label: 'Top-up completed' },
  { value: 'access.denied', label: 'Access denied' },
  { value: 'account.export_requested', label: 'Data export requested' },
];

/** The badge of an outcome: success, denied or failed. */
export const outcomeBadges: Record<string, string> = { success: 'badge ok', denied: 'badge bad', failed: 'badge warn' };
