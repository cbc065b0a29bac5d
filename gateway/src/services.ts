import type { DescFile, DescService } from '@bufbuild/protobuf';
import type { ServiceName } from '@switchboard/contracts/components';
import { file_switchboard_billing_v1_billing } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { file_switchboard_conversations_v1_conversations } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { file_switchboard_identity_v1_identity } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { file_switchboard_keys_v1_keys } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { file_switchboard_webhooks_v1_webhooks } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';

/** The proto file of each service: the gateway's routes and OpenAPI document come from these. */
export const serviceFiles: Record<ServiceName, DescFile> = {
  identity: file_switchboard_identity_v1_identity,
  keys: file_switchboard_keys_v1_keys,
  billing: file_switchboard_billing_v1_billing,
  conversations: file_switchboard_conversations_v1_conversations,
  webhooks: file_switchboard_webhooks_v1_webhooks,
};

/** Every RPC service with the mesh service that serves it. */
export function meshServices(): Array<{ owner: ServiceName; service: DescService }> {
  return Object.entries(serviceFiles).flatMap(([owner, file]) => file.services.map((service) => ({ owner: owner as ServiceName, service })));
}
