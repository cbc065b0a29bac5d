import { addOutboxTraceContext, dropOutboxTraceContext } from '@switchboard/runtime/outbox';

export { addOutboxTraceContext as up, dropOutboxTraceContext as down };
