import type { Schemas } from '@switchboard/sdk';
import { Loaded } from '../../components/loaded';
import { Money } from '../../components/money';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';

type Plan = Schemas['switchboard.billing.v1.Plan'];

/** The plan with what it changes against list prices, and the API's advice on a cheaper plan over the last 30 days. */
export function PlanSection() {
  const { client } = useSignedIn();
  const state = useLoad(() => Promise.all([client.get('/v1/billing/plan'), client.get('/v1/billing/upgrade-hint')]), [client]);
  return (
    <Section title="Plan">
      <Loaded state={state} what="Loading the plan">
        {([{ plan }, { hint }]) => (
          <>
            <PlanFacts plan={plan} />
            {hint.recommend_plan ? (
              <p className="upgrade-hint">
                <strong>
                  The {hint.recommend_plan} plan would have cost {hint.savings_pct}% less
                </strong>{' '}
                over the last 30 days, its monthly fee included, for the same usage.
              </p>
            ) : (
              <p className="muted">No other plan would have cost less over the last 30 days.</p>
            )}
          </>
        )}
      </Loaded>
    </Section>
  );
}

function PlanFacts({ plan }: { plan: Plan }) {
  const { discounts } = plan;
  return (
    <dl className="facts">
      <dt>Plan</dt>
      <dd>
        <strong>{plan.name}</strong> <span className="muted">({plan.plan_id})</span>
      </dd>
      <dt>Monthly fee</dt>
      <dd>
        <Money amount={plan.monthly_fee_usd} />
      </dd>
      {discounts && (
        <>
          <dt>Fast tier</dt>
          <dd>{discounts.fast_pct}% off the list price per token</dd>
          <dt>Balanced tier</dt>
          <dd>{discounts.balanced_pct}% off the list price per token</dd>
          <dt>Passthrough models</dt>
          <dd>{discounts.passthrough_markup_pct}% on the provider's cost</dd>
          <dt>Your own provider key</dt>
          <dd>{discounts.byok_fee_pct}% fee on the provider's cost</dd>
        </>
      )}
    </dl>
  );
}
