import { formatMoney, roundToCents } from '../decimal';

function withCurrency(formatted: string, currency: string): string {
  if (currency !== 'USD') return `${formatted} ${currency}`;
  const negative = formatted.startsWith('-');
  return `${negative ? '-' : ''}$${negative ? formatted.slice(1) : formatted}`;
}

function withSign(formatted: string, signed: boolean): string {
  return signed && !formatted.startsWith('-') && /[1-9]/.test(formatted) ? `+${formatted}` : formatted;
}

/**
 * An amount of money from the API: a decimal string with its currency (`-$1,234.50`, `12.00 EUR`),
 * never turned into a float. Exact by default (tables, per-request costs, prices: every digit
 * the API bills); `rounded` shows it to cents, for a headline figure, with the exact amount
 * in its title (docs/decisions.md#dashboard-pages). `signed`: a credit shows its `+` as a debit its `-`
 * (a ledger's movements).
 */
export function Money({
  amount,
  currency = 'USD',
  rounded = false,
  signed = false,
}: {
  amount: string;
  currency?: string;
  rounded?: boolean;
  signed?: boolean;
}) {
  const exact = withSign(withCurrency(formatMoney(amount), currency), signed);
  if (!rounded) return <span className="money">{exact}</span>;
  const shown = withSign(withCurrency(formatMoney(roundToCents(amount)), currency), signed);
  return (
    <span className="money" title={shown === exact ? undefined : `${exact} exactly`}>
      {shown}
    </span>
  );
}
