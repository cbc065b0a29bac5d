import { useRef, useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { can } from '../../permissions';
import { useSignedIn } from '../../session';
import { safeCheckoutUrl } from './checkout-link';
import { newIdempotencyKey } from './idempotency-key';

/**
 * Adds funds: the API starts a checkout and the user pays on its page (the sandbox's, or Stripe
 * Checkout), which links back to this page. One idempotency key per amount: a second click, or a
 * retry after an answer that never arrived, gets the same checkout, never a second payment.
 */
export function TopUpSection() {
  const { client, role, workspace } = useSignedIn();
  const [amount, setAmount] = useState('');
  const [leaving, setLeaving] = useState(false);
  const attempt = useRef<{ amount: string; key: string }>(undefined);
  if (!can(role, 'billing.topup')) {
    return (
      <Section title="Add funds">
        <p>
          Your role in {workspace.name} ({role}) does not allow top-ups. The owner or an admin of the workspace can add funds.
        </p>
      </Section>
    );
  }
  const submit = async () => {
    const value = amount.trim();
    if (attempt.current?.amount !== value) attempt.current = { amount: value, key: newIdempotencyKey() };
    const checkout = await client.post('/v1/billing/topup', { body: { amount_usd: value, idempotency_key: attempt.current.key } });
    const target = safeCheckoutUrl(checkout.checkout_url);
    if (!target) throw new Error('The payment page has an address this page cannot open; the top-up is listed below.');
    setLeaving(true);
    window.location.assign(target);
  };
  return (
    <Section title="Add funds">
      <p>You pay on the payment page, then its link brings you back here, still signed in.</p>
      <Form onSubmit={submit} submitLabel="Continue to payment" busyLabel="Starting the payment…" label="Add funds">
        <Field
          name="amount_usd"
          label="Amount in USD"
          hint="Above 0, at most 2 decimals, e.g. 25.00."
          inputMode="decimal"
          value={amount}
          onChange={setAmount}
          required
        />
      </Form>
      {leaving && <Notice>Opening the payment page…</Notice>}
    </Section>
  );
}
