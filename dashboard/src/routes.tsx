import type { ComponentType } from 'react';
import { AcceptInvitationPage } from './pages/accept-invitation-page';
import { AccountPage } from './pages/account-page';
import { ActivityPage } from './pages/activity-page';
import { AuditPage } from './pages/audit-page';
import { BillingPage } from './pages/billing-page';
import { ConversationsPage } from './pages/conversations-page';
import { FeedbackPage } from './pages/feedback-page';
import { GenerationPage } from './pages/generation-page';
import { KeyPage } from './pages/key-page';
import { KeysPage } from './pages/keys-page';
import { ModelsPage } from './pages/models-page';
import { OrganizationPage } from './pages/organization-page';
import { OverviewPage } from './pages/overview-page';
import { PlaygroundPage } from './pages/playground-page';
import { ResetPasswordConfirmPage } from './pages/reset-password-confirm-page';
import { ResetPasswordPage } from './pages/reset-password-page';
import { SessionsPage } from './pages/sessions-page';
import { SignInPage } from './pages/sign-in-page';
import { SignUpPage } from './pages/sign-up-page';
import { UsagePage } from './pages/usage-page';
import { VerifyEmailPage } from './pages/verify-email-page';
import { WebhookPage } from './pages/webhook-page';
import { WebhooksPage } from './pages/webhooks-page';

export interface Route {
  /** The path under /app; `:name` segments are parameters (`/keys/:keyId`). */
  path: string;
  /** Gets the path's parameters. */
  page: ComponentType<{ params: Record<string, string> }>;
  /**
   * Who sees it: `signed-in` (the default: signed-out visitors go to the sign-in page first),
   * `signed-out` (sign-in pages: a signed-in user goes to the account page), `anyone`.
   */
  audience?: 'signed-in' | 'signed-out' | 'anyone';
  /** The link's text in the navigation bar; pages without one are reached from other pages. */
  nav?: string;
  /** The action of the API's role × action table (`webhooks.read`) the role needs to see the page. */
  action?: string;
}

/** Every page of the dashboard; the navigation bar lists those with `nav`, in this order. */
export const routes: Route[] = [
  { path: '/sign-in', page: SignInPage, audience: 'signed-out' },
  { path: '/sign-up', page: SignUpPage, audience: 'signed-out' },
  { path: '/verify-email', page: VerifyEmailPage, audience: 'anyone' },
  { path: '/reset-password', page: ResetPasswordPage, audience: 'anyone' },
  { path: '/reset-password/confirm', page: ResetPasswordConfirmPage, audience: 'anyone' },
  // For anyone: a signed-out visitor of the mail's link is asked to sign in, the token kept.
  { path: '/invitations/accept', page: AcceptInvitationPage, audience: 'anyone' },
  { path: '/overview', page: OverviewPage, nav: 'Overview' },
  { path: '/account', page: AccountPage, nav: 'Account' },
  // The data-export mail's link (services/identity/src/data-exports.ts): the account page, that export shown.
  { path: '/account/exports/:exportId', page: AccountPage },
  { path: '/sessions', page: SessionsPage, nav: 'Sessions' },
  { path: '/organization', page: OrganizationPage, nav: 'Organization', action: 'members.read' },
  { path: '/keys', page: KeysPage, nav: 'Keys', action: 'keys.read' },
  { path: '/keys/:keyId', page: KeyPage, action: 'keys.read' },
  { path: '/billing', page: BillingPage, nav: 'Billing', action: 'billing.read' },
  { path: '/usage', page: UsagePage, nav: 'Usage', action: 'billing.read' },
  { path: '/activity', page: ActivityPage, nav: 'Activity', action: 'billing.read' },
  { path: '/generations/:generationId', page: GenerationPage, action: 'billing.read' },
  { path: '/models', page: ModelsPage, nav: 'Models', action: 'billing.read' },
  { path: '/playground', page: PlaygroundPage, nav: 'Playground' },
  { path: '/conversations', page: ConversationsPage, nav: 'Conversations', action: 'conversations.read' },
  { path: '/conversations/:conversationId', page: ConversationsPage, action: 'conversations.read' },
  { path: '/feedback', page: FeedbackPage, nav: 'Feedback', action: 'feedback.read' },
  { path: '/webhooks', page: WebhooksPage, nav: 'Webhooks', action: 'webhooks.read' },
  { path: '/webhooks/:webhookId', page: WebhookPage, action: 'webhooks.read' },
  { path: '/audit', page: AuditPage, nav: 'Audit log', action: 'audit.read' },
];

/** Where a signed-in user lands. */
export const homePath = '/overview';
