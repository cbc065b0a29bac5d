import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { ConnectRouter, ServiceImpl } from '@connectrpc/connect';
import { BillingService, CheckoutService, UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { workspaceCaller } from '@switchboard/runtime/caller';
import type { Pricing } from '@switchboard/runtime/pricing';
import { requestIdOf } from '@switchboard/runtime/server';
import type { AutoTopups } from './auto-topups.js';
import type { BalanceLeases } from './balance-leases.js';
import { sandboxCheckoutPage } from './checkout-page.js';
import type { Generations } from './generations.js';
import type { PaymentMethods } from './payment-methods.js';
import type { Reports } from './reports.js';
import { sandboxSetupPage } from './sandbox-setup-page.js';
import type { Statements } from './statements.js';
import type { StripeWebhooks } from './stripe-webhooks.js';
import type { Topups } from './topups.js';
import type { UsageLedger } from './usage.js';
import type { UsageReports } from './usage-report.js';

/**
 * The RPC surface of the billing service: translation only; the work happens in the domain
 * modules. Workspace RPCs act in the workspace the gateway resolved (the mesh token's), after
 * their proto access rule (billing.read, billing.topup) was applied.
 */

export interface BillingHandlers {
  pricing: Pricing;
  usage: UsageLedger;
  leases: BalanceLeases;
  reports: Reports;
  generations: Generations;
  topups: Topups;
  paymentMethods: PaymentMethods;
  stripeWebhooks: StripeWebhooks;
  statements: Statements;
  autoTopups: AutoTopups;
  usageReports: UsageReports;
}

export function registerRoutes(router: ConnectRouter, handlers: BillingHandlers): void {
  const { pricing, usage, leases, reports, generations, topups, paymentMethods, stripeWebhooks, statements, autoTopups, usageReports } = handlers;

  const billing: ServiceImpl<typeof BillingService> = {
    getUsageReport: (req, ctx) => usageReports.report(workspaceCaller(ctx).workspaceId, req),
    getBalance: (_req, ctx) => reports.balance(workspaceCaller(ctx).workspaceId),
    getUsage: (req, ctx) => reports.usage(workspaceCaller(ctx).workspaceId, req.days),
    getUsageByTier: (req, ctx) => reports.usageByTier(workspaceCaller(ctx).workspaceId, req.days),
    getPlan: (_req, ctx) => reports.plan(workspaceCaller(ctx).workspaceId),
    getUpgradeHint: (_req, ctx) => reports.upgradeHint(workspaceCaller(ctx).workspaceId),
    createCheckout: (req, ctx) => topups.create(workspaceCaller(ctx), { amount: req.amountUsd, idempotencyKey: req.idempotencyKey }),
    createTopup: (req, ctx) => topups.create(workspaceCaller(ctx), { amount: req.amountUsd, idempotencyKey: req.idempotencyKey }),
    listTopups: (req, ctx) => topups.list(workspaceCaller(ctx).workspaceId, { limit: req.limit, after: req.after }),
    getPrices: (_req, ctx) => reports.prices(workspaceCaller(ctx).workspaceId),
    listGenerations: (req, ctx) => generations.list(workspaceCaller(ctx), { limit: req.limit, after: req.after, keyId: req.keyId }),
    getGenerationRecord: (req, ctx) => generations.get(workspaceCaller(ctx), req.generationId),
    createPaymentMethodSetup: (_req, ctx) => paymentMethods.createSetup(workspaceCaller(ctx)),
    listPaymentMethods: (req, ctx) => paymentMethods.list(workspaceCaller(ctx).workspaceId, { limit: req.limit, after: req.after }),
    deletePaymentMethod: async (req, ctx) => {
      await paymentMethods.remove(workspaceCaller(ctx), req.paymentMethodId);
      return {};
    },
    getAutoTopup: (_req, ctx) => autoTopups.get(workspaceCaller(ctx).workspaceId),
    updateAutoTopup: (req, ctx) =>
      autoTopups.update(workspaceCaller(ctx), {
        enabled: req.enabled,
        thresholdUsd: req.thresholdUsd,
        amountUsd: req.amountUsd,
        monthlyLimitUsd: req.monthlyLimitUsd,
        lowBalanceThresholdUsd: req.lowBalanceThresholdUsd,
      }),
    listLedgerEntries: (req, ctx) => statements.entries(workspaceCaller(ctx).workspaceId, { limit: req.limit, after: req.after }),
    getStatement: (req, ctx) => statements.statement(workspaceCaller(ctx).workspaceId, req.month),
  };

  const checkout: ServiceImpl<typeof CheckoutService> = {
    getSandboxCheckout: (req, ctx) => sandboxCheckoutPage(topups, req.token, ctx),
    completeSandboxCheckout: (req, ctx) => topups.completeSandbox(req.token, requestIdOf(ctx)),
    getSandboxSetup: (req, ctx) => sandboxSetupPage(paymentMethods, req.token, ctx),
    completeSandboxSetup: (req, ctx) => paymentMethods.completeSandboxSetup(req.token, req.card, requestIdOf(ctx)),
    handleStripeWebhook: async (req, ctx) => {
      await stripeWebhooks.handle({ body: req.body?.data, signature: req.stripeSignature, requestId: requestIdOf(ctx) });
      return {};
    },
  };

  const usageService: ServiceImpl<typeof UsageService> = {
    recordUsage: (req, ctx) =>
      usage.record({
        generationId: req.generationId,
        keyId: req.keyId,
        workspaceId: req.workspaceId,
        model: req.model,
        routedModel: req.routedModel,
        inputTokens: req.inputTokens,
        outputTokens: req.outputTokens,
        upstreamCostUsd: req.upstreamCostUsd,
        byok: req.byok,
        occurredAt: req.occurredAt ? timestampDate(req.occurredAt) : undefined,
        reservationId: req.reservationId,
        requestId: requestIdOf(ctx),
      }),
    getGeneration: (req) => usage.generation(req.generationId, req.workspaceId),
    leaseBalance: (req) =>
      leases.lease({
        workspaceId: req.workspaceId,
        leaseId: req.leaseId,
        holder: req.holder,
        usedUsd: req.usedUsd,
        wantUsd: req.wantUsd,
        minUsd: req.minUsd,
      }),
    releaseBalanceLease: async (req) => {
      await leases.release(req.leaseId, req.usedUsd);
      return {};
    },
    getPriceList: () => pricing.priceList(),
  };

  router.service(BillingService, billing);
  router.service(CheckoutService, checkout);
  router.service(UsageService, usageService);
}
