import { createOutboxTables, dropOutboxTables } from '@switchboard/runtime/outbox';

export { createOutboxTables as up, dropOutboxTables as down };
