import type { Schemas } from '@switchboard/sdk';
import { Loaded } from '../../components/loaded';
import { Money } from '../../components/money';
import { Section } from '../../components/section';
import { compareDecimals } from '../../decimal';
import { formatDateTime } from '../../format';
import type { LoadState } from '../../use-load';

type Balance = Schemas['switchboard.billing.v1.Balance'];

/** The prepaid balance; at zero or below, the workspace's model requests are refused. */
export function BalanceSection({ balance }: { balance: LoadState<Balance> }) {
  return (
    <Section title="Balance">
      <Loaded state={balance} what="Loading the balance">
        {({ balance_usd, currency, updated_at }) => {
          const empty = balance_usd.startsWith('-') || compareDecimals(balance_usd, '0') === 0;
          return (
            <>
              <p className="balance" data-testid="balance">
                <Money amount={balance_usd} currency={currency} rounded />
              </p>
              <p className="muted">Last changed {formatDateTime(updated_at)}. Model requests are paid from it as they are made.</p>
              {empty && (
                <p className="warning">
                  The balance is used up: the workspace's keys are refused for model requests until it is topped up. API calls such as this page keep working.
                </p>
              )}
            </>
          );
        }}
      </Loaded>
    </Section>
  );
}
