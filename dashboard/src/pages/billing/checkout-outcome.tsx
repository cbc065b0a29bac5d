import { Money } from '../../components/money';
import { Notice } from '../../components/notice';
import type { Checkout } from './topups-section';

/** How the top-up the user just came back from went (the payment page's link names it: `?checkout_id=`). */
export function CheckoutOutcome({ checkout }: { checkout: Checkout }) {
  const amount = <Money amount={checkout.amount_usd} />;
  switch (checkout.status) {
    case 'completed':
      return <Notice>Paid: {amount} was added to the balance.</Notice>;
    case 'pending':
      return (
        <p className="warning" role="status">
          The top-up of {amount} is not paid yet. If you just paid, the payment is being confirmed and this page updates by itself; otherwise pay it from the
          list of top-ups below.
        </p>
      );
    default:
      return (
        <p className="warning" role="status">
          The top-up of {amount} is {checkout.status}: nothing was added to the balance. Start a new one below.
        </p>
      );
  }
}
