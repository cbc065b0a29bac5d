import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { UsageRecordSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { readEventsConfig, readString } from '@switchboard/runtime/config';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { formatMoney } from '@switchboard/runtime/money';
import { workSubjects } from '@switchboard/runtime/nats';
import { defaultPricingPath, type Priced, Pricing } from '@switchboard/runtime/pricing';
import type { BenchSession } from './session.js';

/** One usage as the data plane has it when its answer ends: whose it is, the model asked for, what it used. */
export interface Usage extends Priced {
  generationId: string;
  keyId: string;
  workspaceId: string;
  model: string;
}

/** What publishing a usage answered: the cost it was priced at, and whether JetStream had the generation id already. */
export type PublishUsage = (usage: Usage) => Promise<{ costUsd: string; duplicate: boolean }>;

/**
 * Usage records published as the data plane publishes them (data-plane/src/completions.ts and
 * work-publisher.ts): a binary billing.v1.UsageRecord priced with the shared pricing module
 * under the plan of a new workspace (the default plan) and the mesh's pricing file, on the
 * mesh's work stream (its WORK_SUBJECT_PREFIX and WORK_STREAM), message id = generation id,
 * resolved once JetStream acknowledged it. Billing settles them like a front-door request's.
 * No lease ids: the bench reserved nothing, so no lease is settled. One NATS connection, as a
 * data plane has, closed at the end of the session.
 */
export async function usagePublisher(session: BenchSession, mesh: Mesh): Promise<PublishUsage> {
  // The settings the components read: theirs are the mesh's env over this process's.
  const env = { ...process.env, ...mesh.env };
  const { natsUrl, workSubjectPrefix, workStream } = readEventsConfig(env);
  const pricing = Pricing.load(readString('SWITCHBOARD_PRICING_FILE', defaultPricingPath, env));
  const planId = pricing.defaultPlan;
  const subject = workSubjects(workSubjectPrefix).usage;
  const nc = await connect({ servers: natsUrl, timeout: 5000 });
  session.defer('NATS connection of the usage records', () => nc.close());
  const js = jetstream(nc);
  return async (usage) => {
    const costUsd = formatMoney(pricing.cost(usage, planId));
    const record = create(UsageRecordSchema, {
      ...usage,
      occurredAt: timestampFromDate(new Date()),
      costUsd,
      planId,
      pricingVersion: pricing.version,
    });
    const ack = await js.publish(subject, toBinary(UsageRecordSchema, record), { msgID: usage.generationId, timeout: 2000 });
    if (ack.stream !== workStream) throw new Error(`the usage record was acknowledged by stream ${ack.stream}, not the work stream ${workStream}`);
    return { costUsd, duplicate: ack.duplicate };
  };
}
