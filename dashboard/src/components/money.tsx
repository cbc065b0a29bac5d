import { formatMoney, roundToCents } from '../decimal';

function withCurrency(formatted: string, currency: string): string {
  if (currency !== 'USD') return `${formatted} ${currency}`;
  const negative = formatted.startsWith('-');
  return `${negative ? '-' : ''}$${negative ? formatted.slice(1) : formatted}`;
}

/**
 * An amount of money from the API: a decimal string with its currency (`-$1,234.50`, `12.00 EUR`),
 * never turned into a float. Exact by default (tables, per-request costs, prices: every digit
 * the API bills); `rounded` shows it to cents, for a headline figure, with the exact amount
 * in its title (docs/decisions.md#dashboard-pages).
 */
export function Money({ amount, currency = 'USD', rounded = false }: { amount: string; currency?: string; rounded?: boolean }) {
  const exact = withCurrency(formatMoney(amount), currency);
  if (!rounded) return <span className="money">{exact}</span>;
  const shown = withCurrency(formatMoney(roundToCents(amount)), currency);
  return (
    <span className="money" title={shown === exact ? undefined : `${exact} exactly`}>
      {shown}
    </span>
  );
}
