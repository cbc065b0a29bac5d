import type { ConnectRouter, ServiceImpl } from '@connectrpc/connect';
import { ConversationService, ExchangeService, FeedbackService, RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { workspaceCaller } from '@switchboard/runtime/caller';
import { inputCheckedInHandler, inputProblem } from '@switchboard/runtime/input-rules';
import { statusOverrideHeader } from '@switchboard/runtime/server';
import type { Db } from '@switchboard/runtime/sql';
import type { Conversations } from './conversations.js';
import { exportWorkspace } from './export.js';
import type { FeedbackLedger } from './feedback.js';
import type { Router } from './routing.js';

/**
 * The RPC surface of the conversations service: translation only; the work happens in the domain
 * modules. Every REST RPC acts in the workspace the gateway resolved, after its proto access rule;
 * the data plane's internal RPCs name theirs.
 */

export interface ConversationsHandlers {
  conversations: Conversations;
  feedback: FeedbackLedger;
  router: Router;
  db: Db;
}

export function registerRoutes(router: ConnectRouter, handlers: ConversationsHandlers): void {
  const { conversations, feedback } = handlers;

  const conversationService: ServiceImpl<typeof ConversationService> = {
    createConversation: (req, ctx) => conversations.create(workspaceCaller(ctx).workspaceId, { title: req.title, metadata: req.metadata }),
    listConversations: (req, ctx) => conversations.list(workspaceCaller(ctx).workspaceId, { limit: req.limit, after: req.after }),
    getConversation: (req, ctx) => {
      const caller = workspaceCaller(ctx);
      return conversations.get(caller.workspaceId, req.conversationId, caller);
    },
    // These three find the conversation before their input is judged (docs/conventions.md#order-of-checks).
    updateConversation: inputCheckedInHandler(async (req, ctx) => {
      const caller = workspaceCaller(ctx);
      await conversations.refuse(caller.workspaceId, req.conversationId, inputProblem(ctx), caller);
      return conversations.update(caller.workspaceId, req.conversationId, { title: req.title, metadata: req.metadata }, caller);
    }),
    async deleteConversation(req, ctx) {
      const caller = workspaceCaller(ctx);
      await conversations.delete(caller.workspaceId, req.conversationId, caller);
      return {};
    },
    createMessage: inputCheckedInHandler(async (req, ctx) => {
      const caller = workspaceCaller(ctx);
      await conversations.refuse(caller.workspaceId, req.conversationId, inputProblem(ctx), caller);
      return conversations.append(caller.workspaceId, req.conversationId, { role: req.role, content: req.content }, caller);
    }),
    listMessages: inputCheckedInHandler(async (req, ctx) => {
      const caller = workspaceCaller(ctx);
      await conversations.refuse(caller.workspaceId, req.conversationId, inputProblem(ctx), caller);
      return conversations.messages(caller.workspaceId, req.conversationId, { limit: req.limit, after: req.after, order: req.order }, caller);
    }),
    // Identity's data export names the user's personal workspace: no member acts here.
    exportUserConversations: (req) => exportWorkspace(handlers.db, req),
  };

  const feedbackService: ServiceImpl<typeof FeedbackService> = {
    // The generation is found (404) before the rating is judged (docs/conventions.md#order-of-checks).
    recordFeedback: inputCheckedInHandler(async (req, ctx) => {
      const result = await feedback.record(
        workspaceCaller(ctx),
        { generationId: req.generationId, rating: req.rating, comment: req.comment, tags: req.tags },
        () => inputProblem(ctx),
      );
      // A replaced rating is no new resource (docs/api/conversations.md#feedback: 200, not 201).
      if (!result.created) ctx.responseHeader.set(statusOverrideHeader, '200');
      return result.feedback;
    }),
    getFeedbackSummary: (req, ctx) => feedback.summary(workspaceCaller(ctx).workspaceId, req.days),
  };

  const routingService: ServiceImpl<typeof RoutingService> = {
    routeModel: (req) => handlers.router.route(req.tier, req.routingPolicy),
    explainRoute: (req) => handlers.router.explain(req.tier, req.routingPolicy),
  };

  // The data plane names the workspace (its key's): no member acts here.
  const exchangeService: ServiceImpl<typeof ExchangeService> = {
    appendExchange: (req) =>
      conversations.appendExchange(
        req.workspaceId,
        req.conversationId,
        req.messages.map((message) => ({ role: message.role, content: message.content })),
      ),
  };

  router.service(ConversationService, conversationService);
  router.service(ExchangeService, exchangeService);
  router.service(FeedbackService, feedbackService);
  router.service(RoutingService, routingService);
}
