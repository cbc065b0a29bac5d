import type { ConnectRouter, HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { workspaceCaller } from '@switchboard/runtime/caller';
import { invalidArgument } from '@switchboard/runtime/errors';
import { changedKeyHeader } from '@switchboard/runtime/server';
import type { AlertWebhooks } from './alert-webhooks.js';
import type { KeyAuthorizer } from './authorization.js';
import type { CapLeases } from './cap-leases.js';
import type { KeyStateFeed } from './key-state-feed.js';
import type { Keys } from './keys.js';
import { type BudgetHandlers, rateLeaseHandlers } from './spend-limit-routes.js';

/**
 * The RPC surface of the keys service: translation only; the work happens in the domain modules.
 * Each RPC's access rule is its proto option (keys.proto): the workspace ones are decided before
 * the handler, the `keys.manage` ones by the domain module once it has found the key (404 before
 * 403).
 */

export interface KeysHandlers {
  keys: Keys;
  authorizer: KeyAuthorizer;
  alertWebhooks: AlertWebhooks;
  stateFeed: KeyStateFeed;
  capLeases: CapLeases;
  budgets: BudgetHandlers;
}

/** Tells the gateway to drop its cached standing of the key (see changedKeyHeader). */
function announceChangedKey(ctx: HandlerContext, keyId: string): void {
  ctx.responseHeader.set(changedKeyHeader, keyId);
}

export function registerRoutes(router: ConnectRouter, handlers: KeysHandlers): void {
  const { keys, authorizer } = handlers;
  const service: ServiceImpl<typeof KeyService> = {
    async createKey(req, ctx) {
      return keys.create(workspaceCaller(ctx), {
        name: req.name,
        capUsd: req.monthlySpendCapUsd,
        routingPolicy: req.routingPolicy,
        scopes: req.scopes,
        expiresAt: req.expiresAt,
        allowedModels: req.allowedModels,
        rateLimits: req.rateLimits,
        spendLimits: req.spendLimits,
      });
    },
    async listKeys(req, ctx) {
      return keys.list(workspaceCaller(ctx), { limit: req.limit, after: req.after, status: req.status });
    },
    async getKey(req, ctx) {
      return keys.get(workspaceCaller(ctx), req.keyId);
    },
    async updateKey(req, ctx) {
      const key = await keys.update(workspaceCaller(ctx), req.keyId, {
        name: req.name,
        scopes: req.scopes,
        expiresAt: req.expiresAt,
        allowedModels: req.allowedModels,
        rateLimits: req.rateLimits,
      });
      announceChangedKey(ctx, req.keyId);
      return key;
    },
    async updateSpendCap(req, ctx) {
      const key = await keys.setSpendCap(workspaceCaller(ctx), req.keyId, { capUsd: req.monthlySpendCapUsd, clear: req.clear });
      announceChangedKey(ctx, req.keyId);
      return key;
    },
    async setAlertWebhook(req, ctx) {
      return keys.setAlertWebhook(workspaceCaller(ctx), req.keyId, { url: req.url, thresholdPct: req.thresholdPct, thresholdsPct: req.thresholdsPct });
    },
    async deleteAlertWebhook(req, ctx) {
      return keys.deleteAlertWebhook(workspaceCaller(ctx), req.keyId);
    },
    async setRoutingPolicy(req, ctx) {
      const key = await keys.setRoutingPolicy(workspaceCaller(ctx), req.keyId, req.routingPolicy);
      announceChangedKey(ctx, req.keyId);
      return key;
    },
    async revokeKey(req, ctx) {
      const key = await keys.revoke(workspaceCaller(ctx), req.keyId);
      announceChangedKey(ctx, req.keyId);
      return key;
    },
    async updateKeySpendLimits(req, ctx) {
      const key = await keys.setSpendLimits(workspaceCaller(ctx), req.keyId, req.spendLimits);
      announceChangedKey(ctx, req.keyId);
      return key;
    },
    async rotateKey(req, ctx) {
      const rotated = await keys.rotate(workspaceCaller(ctx), req.keyId, req.gracePeriodSeconds);
      announceChangedKey(ctx, req.keyId);
      return rotated;
    },
    async getCurrentKey(_req, ctx) {
      return keys.current(ctx);
    },
    ...rateLeaseHandlers(handlers.budgets.rateLeases),
    async authorizeKey(req) {
      return authorizer.authorize(req.fullKey, req.estimatedCostUsd);
    },
    async releaseReservation(req) {
      await authorizer.release(req.reservationId);
      return {};
    },
    async listKeyStates(req) {
      return handlers.stateFeed.list(req.afterVersion, req.limit);
    },
    async leaseCap(req) {
      return handlers.capLeases.lease({
        keyId: req.keyId,
        workspaceId: req.workspaceId,
        leaseId: req.leaseId,
        holder: req.holder,
        usedUsd: req.usedUsd,
        wantUsd: req.wantUsd,
        minUsd: req.minUsd,
      });
    },
    async releaseCapLease(req) {
      await handlers.capLeases.release(req.leaseId, req.usedUsd);
      return {};
    },
    async authenticateKey(req) {
      return authorizer.authenticate(req.fullKey);
    },
    async describeKey(req) {
      if (req.keyId === '') throw invalidArgument('key_id', 'key_id is required.');
      return keys.owner(req.keyId);
    },
    exportUserKeys: (req) => keys.exportCreatedBy(req.userId, req.limit),
    async resolveAlertWebhook(req) {
      if (req.keyId === '') throw invalidArgument('key_id', 'key_id is required.');
      return handlers.alertWebhooks.resolve(req.keyId);
    },
  };
  router.service(KeyService, service);
}
