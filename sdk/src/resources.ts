import type { MediaType, Readable, SuccessResponse } from 'openapi-typescript-helpers';
import { type Page, type Paginated, paginate } from './pagination.js';
import type { components, paths } from './schema.js';
import { type RequestOptions, randomKey } from './transport.js';
import { verifyWebhook } from './webhooks.js';

type Schemas = components['schemas'];
type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type Op<P extends keyof paths, M extends Method> = paths[P][M];

/** The JSON body of an operation. */
export type BodyOf<P extends keyof paths, M extends Method> = Op<P, M> extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
/** The query parameters of an operation. */
export type QueryOf<P extends keyof paths, M extends Method> = Op<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;
/** The success body of an operation (undefined for a 204). */
export type ResultOf<P extends keyof paths, M extends Method> =
  Op<P, M> extends { responses: infer R extends Record<string | number, unknown> }
    ? [keyof SuccessResponse<R, MediaType>] extends [never]
      ? undefined
      : Readable<SuccessResponse<R, MediaType>>
    : never;
/** The items of a list operation. */
export type ItemOf<P extends keyof paths> = ResultOf<P, 'get'> extends { data: Array<infer T> } ? T : never;
/** The query of a list, without its cursor (the iterator moves it). */
export type ListQuery<P extends keyof paths> = Omit<QueryOf<P, 'get'>, 'after'>;

/** A call by path (the client's), untyped: the methods below give it its types. */
type Call = (method: Method, url: string, init?: Record<string, unknown>) => Promise<unknown>;

/** What a resource needs of the client. */
export interface ResourceDeps {
  call: Call;
  /** Keeps a session the API answered (registration, sign-in); the client then uses it. */
  storeSession(session: Schemas['switchboard.identity.v1.Session']): Promise<void>;
}

/**
 * The API's routes by resource, as Stripe's and OpenAI's SDKs name them: `sb.keys.create(…)`,
 * `sb.keys.list()` (an async iterator over every page), `sb.billing.topup(…)`. Every method takes
 * the call's options last (RequestOptions: timeout, maxRetries, idempotencyKey, workspaceId, …).
 */
export function createResources({ call, storeSession }: ResourceDeps) {
  const typed =
    <P extends keyof paths, M extends Method>(method: M, path: P) =>
    (init: { path?: Record<string, string>; query?: object; body?: unknown }, options: RequestOptions = {}) =>
      call(method, path, { params: { path: init.path, query: init.query }, body: init.body, ...options }) as Promise<ResultOf<P, M>>;
  /** A list as an async iterator of its items (`.pages()`, `.collect()`, `.firstPage()` too). */
  const list =
    <P extends keyof paths>(path: P) =>
    (pathParams: Record<string, string> | undefined, query: object = {}, options: RequestOptions = {}): Paginated<ItemOf<P>> =>
      paginate((after) => call('get', path, { params: { path: pathParams, query: { ...query, after } }, ...options }) as Promise<Page<ItemOf<P>>>);
  const withSession = async <T extends { session?: Schemas['switchboard.identity.v1.Session'] | null }>(answer: Promise<T>): Promise<T> => {
    const result = await answer;
    if (result.session) await storeSession(result.session);
    return result;
  };

  const auth = {
    /** Creates an account (201 `{user, session}`); the client signs in with its session. */
    register: (body: BodyOf<'/v1/auth/register', 'post'>, options?: RequestOptions) => withSession(typed('post', '/v1/auth/register')({ body }, options)),
    /** Signs in: `{session}` (the client now uses it), or `{mfa_required, mfa_token}` with 2FA on. */
    login: (body: BodyOf<'/v1/auth/login', 'post'>, options?: RequestOptions) => withSession(typed('post', '/v1/auth/login')({ body }, options)),
    /** Completes a sign-in that answered `mfa_required`. */
    loginSecondFactor: (body: BodyOf<'/v1/auth/login/2fa', 'post'>, options?: RequestOptions) =>
      withSession(typed('post', '/v1/auth/login/2fa')({ body }, options)),
    requestPasswordReset: (body: BodyOf<'/v1/auth/password-reset', 'post'>, options?: RequestOptions) =>
      typed('post', '/v1/auth/password-reset')({ body }, options),
    confirmPasswordReset: (body: BodyOf<'/v1/auth/password-reset/confirm', 'post'>, options?: RequestOptions) =>
      typed('post', '/v1/auth/password-reset/confirm')({ body }, options),
    verifyEmail: (body: BodyOf<'/v1/auth/verify-email', 'post'>, options?: RequestOptions) => typed('post', '/v1/auth/verify-email')({ body }, options),
    /** Asks for a new verification mail (always 202, whether or not the address has an account). */
    resendVerificationEmail: (body: BodyOf<'/v1/auth/verify-email/resend', 'post'>, options?: RequestOptions) =>
      typed('post', '/v1/auth/verify-email/resend')({ body }, options),
    /** The public keys of access tokens. */
    jwks: (options?: RequestOptions) => typed('get', '/v1/.well-known/jwks.json')({}, options),
  };

  const account = {
    retrieve: (options?: RequestOptions) => typed('get', '/v1/account')({}, options),
    update: (body: BodyOf<'/v1/account', 'patch'>, options?: RequestOptions) => typed('patch', '/v1/account')({ body }, options),
    changePassword: (body: BodyOf<'/v1/account/password', 'post'>, options?: RequestOptions) => typed('post', '/v1/account/password')({ body }, options),
    deactivate: (body: BodyOf<'/v1/account/deactivate', 'post'>, options?: RequestOptions) => typed('post', '/v1/account/deactivate')({ body }, options),
    twoFactor: {
      retrieve: (options?: RequestOptions) => typed('get', '/v1/account/2fa')({}, options),
      enroll: (body: BodyOf<'/v1/account/2fa/enroll', 'post'>, options?: RequestOptions) => typed('post', '/v1/account/2fa/enroll')({ body }, options),
      activate: (body: BodyOf<'/v1/account/2fa/activate', 'post'>, options?: RequestOptions) => typed('post', '/v1/account/2fa/activate')({ body }, options),
      disable: (body: BodyOf<'/v1/account/2fa/disable', 'post'>, options?: RequestOptions) => typed('post', '/v1/account/2fa/disable')({ body }, options),
      regenerateRecoveryCodes: (body: BodyOf<'/v1/account/2fa/recovery-codes', 'post'>, options?: RequestOptions) =>
        typed('post', '/v1/account/2fa/recovery-codes')({ body }, options),
    },
    sessions: {
      list: (query?: ListQuery<'/v1/account/sessions'>, options?: RequestOptions) => list('/v1/account/sessions')(undefined, query, options),
      revoke: (sessionId: string, options?: RequestOptions) =>
        typed('delete', '/v1/account/sessions/{session_id}')({ path: { session_id: sessionId } }, options),
    },
    exports: {
      create: (body: BodyOf<'/v1/account/export', 'post'>, options?: RequestOptions) => typed('post', '/v1/account/export')({ body }, options),
      retrieve: (exportId: string, options?: RequestOptions) => typed('get', '/v1/account/exports/{export_id}')({ path: { export_id: exportId } }, options),
    },
  };

  const organizations = {
    create: (body: BodyOf<'/v1/organizations', 'post'>, options?: RequestOptions) => typed('post', '/v1/organizations')({ body }, options),
    list: (query?: ListQuery<'/v1/organizations'>, options?: RequestOptions) => list('/v1/organizations')(undefined, query, options),
    retrieve: (orgId: string, options?: RequestOptions) => typed('get', '/v1/organizations/{org_id}')({ path: { org_id: orgId } }, options),
    delete: (orgId: string, options?: RequestOptions) => typed('delete', '/v1/organizations/{org_id}')({ path: { org_id: orgId } }, options),
    transferOwnership: (orgId: string, body: BodyOf<'/v1/organizations/{org_id}/transfer-ownership', 'post'>, options?: RequestOptions) =>
      typed('post', '/v1/organizations/{org_id}/transfer-ownership')({ path: { org_id: orgId }, body }, options),
    invitations: {
      create: (orgId: string, body: BodyOf<'/v1/organizations/{org_id}/invitations', 'post'>, options?: RequestOptions) =>
        typed('post', '/v1/organizations/{org_id}/invitations')({ path: { org_id: orgId }, body }, options),
      list: (orgId: string, query?: ListQuery<'/v1/organizations/{org_id}/invitations'>, options?: RequestOptions) =>
        list('/v1/organizations/{org_id}/invitations')({ org_id: orgId }, query, options),
      revoke: (orgId: string, invitationId: string, options?: RequestOptions) =>
        typed('delete', '/v1/organizations/{org_id}/invitations/{invitation_id}')({ path: { org_id: orgId, invitation_id: invitationId } }, options),
    },
    members: {
      list: (orgId: string, query?: ListQuery<'/v1/organizations/{org_id}/members'>, options?: RequestOptions) =>
        list('/v1/organizations/{org_id}/members')({ org_id: orgId }, query, options),
      update: (orgId: string, userId: string, body: BodyOf<'/v1/organizations/{org_id}/members/{user_id}', 'patch'>, options?: RequestOptions) =>
        typed('patch', '/v1/organizations/{org_id}/members/{user_id}')({ path: { org_id: orgId, user_id: userId }, body }, options),
      remove: (orgId: string, userId: string, options?: RequestOptions) =>
        typed('delete', '/v1/organizations/{org_id}/members/{user_id}')({ path: { org_id: orgId, user_id: userId } }, options),
    },
  };

  const invitations = {
    /** Accepts an invitation with the token of its mail. */
    accept: (body: BodyOf<'/v1/invitations/accept', 'post'>, options?: RequestOptions) => typed('post', '/v1/invitations/accept')({ body }, options),
  };

  const keyPath = (keyId: string) => ({ key_id: keyId });
  const keys = {
    /** Creates a key: 201 `{full_key, key}`; `full_key` is shown only in this answer. */
    create: (body: BodyOf<'/v1/keys', 'post'>, options?: RequestOptions) => typed('post', '/v1/keys')({ body }, options),
    /** The workspace's keys, newest first, across every page. */
    list: (query?: ListQuery<'/v1/keys'>, options?: RequestOptions) => list('/v1/keys')(undefined, query, options),
    retrieve: (keyId: string, options?: RequestOptions) => typed('get', '/v1/keys/{key_id}')({ path: keyPath(keyId) }, options),
    update: (keyId: string, body: BodyOf<'/v1/keys/{key_id}', 'patch'>, options?: RequestOptions) =>
      typed('patch', '/v1/keys/{key_id}')({ path: keyPath(keyId), body }, options),
    /** Revokes a key (200 with the revoked key, kept for audit; revoking twice is fine). */
    revoke: (keyId: string, options?: RequestOptions) => typed('delete', '/v1/keys/{key_id}')({ path: keyPath(keyId) }, options),
    rotate: (keyId: string, body: BodyOf<'/v1/keys/{key_id}/rotate', 'post'> = {}, options?: RequestOptions) =>
      typed('post', '/v1/keys/{key_id}/rotate')({ path: keyPath(keyId), body }, options),
    updateSpendCap: (keyId: string, body: BodyOf<'/v1/keys/{key_id}/spend-cap', 'patch'>, options?: RequestOptions) =>
      typed('patch', '/v1/keys/{key_id}/spend-cap')({ path: keyPath(keyId), body }, options),
    updateSpendLimits: (keyId: string, body: BodyOf<'/v1/keys/{key_id}/spend-limits', 'put'>, options?: RequestOptions) =>
      typed('put', '/v1/keys/{key_id}/spend-limits')({ path: keyPath(keyId), body }, options),
    setAlertWebhook: (keyId: string, body: BodyOf<'/v1/keys/{key_id}/alert-webhook', 'put'>, options?: RequestOptions) =>
      typed('put', '/v1/keys/{key_id}/alert-webhook')({ path: keyPath(keyId), body }, options),
    deleteAlertWebhook: (keyId: string, options?: RequestOptions) => typed('delete', '/v1/keys/{key_id}/alert-webhook')({ path: keyPath(keyId) }, options),
    setRoutingPolicy: (keyId: string, body: BodyOf<'/v1/keys/{key_id}/routing-policy', 'put'>, options?: RequestOptions) =>
      typed('put', '/v1/keys/{key_id}/routing-policy')({ path: keyPath(keyId), body }, options),
    /** The key the client calls with (API keys only). */
    current: (options?: RequestOptions) => typed('get', '/v1/key')({}, options),
  };

  const billing = {
    balance: (options?: RequestOptions) => typed('get', '/v1/billing/balance')({}, options),
    usage: (query?: QueryOf<'/v1/billing/usage', 'get'>, options?: RequestOptions) => typed('get', '/v1/billing/usage')({ query }, options),
    usageByTier: (query?: QueryOf<'/v1/billing/usage/by-tier', 'get'>, options?: RequestOptions) =>
      typed('get', '/v1/billing/usage/by-tier')({ query }, options),
    /** The usage report (`GET /v1/usage`): buckets, groups, CSV or JSON. */
    usageReport: (query?: QueryOf<'/v1/usage', 'get'>, options?: RequestOptions) => typed('get', '/v1/usage')({ query }, options),
    plan: (options?: RequestOptions) => typed('get', '/v1/billing/plan')({}, options),
    upgradeHint: (options?: RequestOptions) => typed('get', '/v1/billing/upgrade-hint')({}, options),
    prices: (options?: RequestOptions) => typed('get', '/v1/billing/prices')({}, options),
    /**
     * Starts a top-up (201 `{checkout_id, checkout_url, amount_usd, status}`). Its body's
     * `idempotency_key` defaults to the call's `Idempotency-Key`, so a retry never pays twice
     * (docs/conventions.md#idempotency); pass your own (an order id) to make a later call answer
     * the first.
     */
    topup: (body: Omit<BodyOf<'/v1/billing/topup', 'post'>, 'idempotency_key'> & { idempotency_key?: string }, options: RequestOptions = {}) => {
      // The header's key stays the call's own: billing compares amounts as decimals ("5" = "5.00")
      // where the gateway compares bodies as bytes, so a caller's key reused with "5" then "5.00"
      // must reach billing, which answers the first top-up.
      const idempotencyKey = options.idempotencyKey ?? randomKey();
      return typed('post', '/v1/billing/topup')({ body: { ...body, idempotency_key: body.idempotency_key ?? idempotencyKey } }, { ...options, idempotencyKey });
    },
    topups: (query?: ListQuery<'/v1/billing/topups'>, options?: RequestOptions) => list('/v1/billing/topups')(undefined, query, options),
    ledger: (query?: ListQuery<'/v1/billing/ledger'>, options?: RequestOptions) => list('/v1/billing/ledger')(undefined, query, options),
    statement: (month: string, options?: RequestOptions) => typed('get', '/v1/billing/statements/{month}')({ path: { month } }, options),
    spendLimits: {
      retrieve: (options?: RequestOptions) => typed('get', '/v1/billing/spend-limits')({}, options),
      update: (body: BodyOf<'/v1/billing/spend-limits', 'put'>, options?: RequestOptions) => typed('put', '/v1/billing/spend-limits')({ body }, options),
    },
    paymentMethods: {
      setup: (body: BodyOf<'/v1/billing/payment-methods/setup', 'post'> = {}, options?: RequestOptions) =>
        typed('post', '/v1/billing/payment-methods/setup')({ body }, options),
      list: (query?: ListQuery<'/v1/billing/payment-methods'>, options?: RequestOptions) => list('/v1/billing/payment-methods')(undefined, query, options),
      delete: (paymentMethodId: string, options?: RequestOptions) =>
        typed('delete', '/v1/billing/payment-methods/{payment_method_id}')({ path: { payment_method_id: paymentMethodId } }, options),
    },
    autoTopup: {
      retrieve: (options?: RequestOptions) => typed('get', '/v1/billing/auto-topup')({}, options),
      update: (body: BodyOf<'/v1/billing/auto-topup', 'put'>, options?: RequestOptions) => typed('put', '/v1/billing/auto-topup')({ body }, options),
    },
  };

  const generations = {
    list: (query?: ListQuery<'/v1/generations'>, options?: RequestOptions) => list('/v1/generations')(undefined, query, options),
    retrieve: (generationId: string, options?: RequestOptions) =>
      typed('get', '/v1/generations/{generation_id}')({ path: { generation_id: generationId } }, options),
  };

  const conversationPath = (conversationId: string) => ({ conversation_id: conversationId });
  const conversations = {
    create: (body: BodyOf<'/v1/conversations', 'post'> = {}, options?: RequestOptions) => typed('post', '/v1/conversations')({ body }, options),
    list: (query?: ListQuery<'/v1/conversations'>, options?: RequestOptions) => list('/v1/conversations')(undefined, query, options),
    retrieve: (conversationId: string, options?: RequestOptions) =>
      typed('get', '/v1/conversations/{conversation_id}')({ path: conversationPath(conversationId) }, options),
    update: (conversationId: string, body: BodyOf<'/v1/conversations/{conversation_id}', 'patch'>, options?: RequestOptions) =>
      typed('patch', '/v1/conversations/{conversation_id}')({ path: conversationPath(conversationId), body }, options),
    delete: (conversationId: string, options?: RequestOptions) =>
      typed('delete', '/v1/conversations/{conversation_id}')({ path: conversationPath(conversationId) }, options),
    messages: {
      create: (conversationId: string, body: BodyOf<'/v1/conversations/{conversation_id}/messages', 'post'>, options?: RequestOptions) =>
        typed('post', '/v1/conversations/{conversation_id}/messages')({ path: conversationPath(conversationId), body }, options),
      list: (conversationId: string, query?: ListQuery<'/v1/conversations/{conversation_id}/messages'>, options?: RequestOptions) =>
        list('/v1/conversations/{conversation_id}/messages')(conversationPath(conversationId), query, options),
    },
  };

  const feedback = {
    /** Rates a generation (201 new, 200 when it replaces the workspace's earlier rating). */
    create: (body: BodyOf<'/v1/feedback', 'post'>, options?: RequestOptions) => typed('post', '/v1/feedback')({ body }, options),
    summary: (query?: QueryOf<'/v1/feedback/summary', 'get'>, options?: RequestOptions) => typed('get', '/v1/feedback/summary')({ query }, options),
  };

  const hook = (workspaceId: string, webhookId: string) => ({ workspace_id: workspaceId, webhook_id: webhookId });
  const webhooks = {
    /** Registers an endpoint of the workspace (an organization id); the answer shows its `secret` once. */
    create: (workspaceId: string, body: BodyOf<'/v1/workspaces/{workspace_id}/webhooks', 'post'>, options?: RequestOptions) =>
      typed('post', '/v1/workspaces/{workspace_id}/webhooks')({ path: { workspace_id: workspaceId }, body }, options),
    list: (workspaceId: string, query?: ListQuery<'/v1/workspaces/{workspace_id}/webhooks'>, options?: RequestOptions) =>
      list('/v1/workspaces/{workspace_id}/webhooks')({ workspace_id: workspaceId }, query, options),
    retrieve: (workspaceId: string, webhookId: string, options?: RequestOptions) =>
      typed('get', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}')({ path: hook(workspaceId, webhookId) }, options),
    update: (workspaceId: string, webhookId: string, body: BodyOf<'/v1/workspaces/{workspace_id}/webhooks/{webhook_id}', 'patch'>, options?: RequestOptions) =>
      typed('patch', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}')({ path: hook(workspaceId, webhookId), body }, options),
    delete: (workspaceId: string, webhookId: string, options?: RequestOptions) =>
      typed('delete', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}')({ path: hook(workspaceId, webhookId) }, options),
    rotateSecret: (
      workspaceId: string,
      webhookId: string,
      body: BodyOf<'/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/rotate-secret', 'post'> = {},
      options?: RequestOptions,
    ) => typed('post', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/rotate-secret')({ path: hook(workspaceId, webhookId), body }, options),
    /** Sends a `webhook.test` delivery at once (202 with the delivery). */
    test: (workspaceId: string, webhookId: string, options?: RequestOptions) =>
      typed('post', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/test')({ path: hook(workspaceId, webhookId), body: {} }, options),
    /** Re-queues every failed delivery created at or after `since`. */
    recover: (
      workspaceId: string,
      webhookId: string,
      body: BodyOf<'/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/recover', 'post'>,
      options?: RequestOptions,
    ) => typed('post', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/recover')({ path: hook(workspaceId, webhookId), body }, options),
    deliveries: {
      list: (
        workspaceId: string,
        webhookId: string,
        query?: ListQuery<'/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries'>,
        options?: RequestOptions,
      ) => list('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries')(hook(workspaceId, webhookId), query, options),
      retrieve: (workspaceId: string, webhookId: string, deliveryId: string, options?: RequestOptions) =>
        typed('get', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries/{delivery_id}')(
          { path: { ...hook(workspaceId, webhookId), delivery_id: deliveryId } },
          options,
        ),
      redeliver: (workspaceId: string, webhookId: string, deliveryId: string, options?: RequestOptions) =>
        typed('post', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver')(
          { path: { ...hook(workspaceId, webhookId), delivery_id: deliveryId }, body: {} },
          options,
        ),
    },
    /** The event types an endpoint may subscribe to, with their schemas. */
    eventTypes: (options?: RequestOptions) => typed('get', '/v1/webhook-event-types')({}, options),
    /** Checks a delivery's signature (docs/webhooks.md#verifying-a-delivery) and answers its parsed event. */
    verify: verifyWebhook,
  };

  const audit = {
    list: (query?: ListQuery<'/v1/audit-events'>, options?: RequestOptions) => list('/v1/audit-events')(undefined, query, options),
  };

  return { auth, account, organizations, invitations, keys, billing, generations, conversations, feedback, webhooks, audit };
}

/** The resource namespaces of a client. */
export type Resources = ReturnType<typeof createResources>;
