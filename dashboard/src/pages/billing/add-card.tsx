import { useState } from 'react';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { useSignedIn } from '../../session';
import { safeCheckoutUrl } from './checkout-link';

/**
 * Starts saving a card: the API opens a setup (Stripe Checkout in setup mode, or the sandbox's
 * page of test cards) and the user enters the card on its page, which links back to this page.
 * Nothing is charged.
 */
export function AddCard({ label = 'Add a card' }: { label?: string }) {
  const { client } = useSignedIn();
  const [leaving, setLeaving] = useState(false);
  const start = async () => {
    const setup = await client.post('/v1/billing/payment-methods/setup', { body: {} });
    const target = safeCheckoutUrl(setup.setup_url);
    if (!target) throw new Error('The card page has an address this page cannot open.');
    setLeaving(true);
    window.location.assign(target);
  };
  return (
    <>
      <Form onSubmit={start} submitLabel={label} busyLabel="Opening the card page…" label={label}>
        {null}
      </Form>
      {leaving && <Notice>Opening the card page…</Notice>}
    </>
  );
}
