import { type JsonValue, toJson } from '@bufbuild/protobuf';
import { ListValueSchema, timestampDate } from '@bufbuild/protobuf/wkt';
import type { ConnectRouter, ServiceImpl } from '@connectrpc/connect';
import { EventService, WebhookService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { callerIn } from './access.js';
import { listEventTypes } from './catalog.js';
import type { Deliveries } from './deliveries.js';
import type { Endpoints } from './endpoints.js';
import type { Intake } from './intake.js';

/**
 * The RPC surface of the webhooks service: translation only; the work happens in the domain
 * modules. The `webhooks.*` rules of webhooks.proto are decided by the domain modules once they
 * found the endpoint (404 before 403); PublishEvent is for the data plane only.
 */

export interface WebhooksHandlers {
  endpoints: Endpoints;
  deliveries: Deliveries;
  intake: Intake;
}

export function registerRoutes(router: ConnectRouter, handlers: WebhooksHandlers): void {
  const { endpoints, deliveries, intake } = handlers;
  const webhooks: ServiceImpl<typeof WebhookService> = {
    async createWebhook(req, ctx) {
      return endpoints.create(callerIn(ctx, req.workspaceId), { url: req.url, events: req.events, description: req.description });
    },
    async listWebhooks(req, ctx) {
      return endpoints.list(callerIn(ctx, req.workspaceId), { limit: req.limit, after: req.after });
    },
    async getWebhook(req, ctx) {
      return endpoints.get(callerIn(ctx, req.workspaceId), req.webhookId);
    },
    async updateWebhook(req, ctx) {
      return endpoints.update(callerIn(ctx, req.workspaceId), req.webhookId, {
        url: req.url,
        events: req.events ? (toJson(ListValueSchema, req.events) as JsonValue[]) : undefined,
        description: req.description,
        enabled: req.enabled,
      });
    },
    async deleteWebhook(req, ctx) {
      await endpoints.delete(callerIn(ctx, req.workspaceId), req.webhookId);
      return {};
    },
    async rotateWebhookSecret(req, ctx) {
      return endpoints.rotateSecret(callerIn(ctx, req.workspaceId), req.webhookId, req.gracePeriodSeconds);
    },
    async testWebhook(req, ctx) {
      return deliveries.test(callerIn(ctx, req.workspaceId), req.webhookId);
    },
    async listDeliveries(req, ctx) {
      return deliveries.list(callerIn(ctx, req.workspaceId), req.webhookId, { limit: req.limit, after: req.after, status: req.status });
    },
    async getDelivery(req, ctx) {
      return deliveries.get(callerIn(ctx, req.workspaceId), req.webhookId, req.deliveryId);
    },
    async redeliverDelivery(req, ctx) {
      return deliveries.redeliver(callerIn(ctx, req.workspaceId), req.webhookId, req.deliveryId);
    },
    async recoverDeliveries(req, ctx) {
      return deliveries.recover(callerIn(ctx, req.workspaceId), req.webhookId, req.since ? timestampDate(req.since) : undefined);
    },
    async listWebhookEventTypes() {
      return listEventTypes();
    },
  };
  router.service(WebhookService, webhooks);
  router.service(EventService, {
    async publishEvent(req) {
      return { eventId: await intake.publish({ workspaceId: req.workspaceId, type: req.type, data: req.data, idempotencyKey: req.idempotencyKey }) };
    },
  });
}
