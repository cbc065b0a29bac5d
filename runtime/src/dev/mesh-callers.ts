import type { DescFile } from '@bufbuild/protobuf';
import type { ComponentName, ServiceName } from '@switchboard/contracts/components';
import { file_switchboard_billing_v1_billing } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { file_switchboard_conversations_v1_conversations } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { file_switchboard_identity_v1_identity } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { file_switchboard_keys_v1_keys } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { file_switchboard_webhooks_v1_webhooks } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { ruleOf } from '../policy.js';

/** The proto package of each service (`switchboard.<service>.v1`): the RPCs it serves. */
const packageOf: Record<ServiceName, DescFile> = {
  identity: file_switchboard_identity_v1_identity,
  keys: file_switchboard_keys_v1_keys,
  billing: file_switchboard_billing_v1_billing,
  conversations: file_switchboard_conversations_v1_conversations,
  webhooks: file_switchboard_webhooks_v1_webhooks,
};

/**
 * The components that may call `service` (docs/api/internal-calls.md#mesh-tokens): the gateway for
 * every RPC that is not internal, and the callers each internal access rule names. Its keyring
 * needs their keys, and no one else's.
 */
export function meshCallersOf(service: ServiceName): ComponentName[] {
  const callers = new Set<string>();
  for (const rpc of packageOf[service].services) {
    for (const method of rpc.methods) {
      const rule = ruleOf(method);
      for (const caller of rule.kind === 'internal' ? rule.callers : ['gateway']) callers.add(caller);
    }
  }
  callers.delete(service);
  return [...callers].sort() as ComponentName[];
}
