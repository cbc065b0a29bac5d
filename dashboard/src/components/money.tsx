/**
 * Formats a decimal string of the API (`"1234.5"`, `"-0.000125"`) without ever turning it into a
 * float: thousands separated, at least two decimals, every further digit kept.
 */
export function formatMoney(amount: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(amount.trim());
  if (!match) return amount;
  const [, sign, whole, fraction = ''] = match;
  const grouped = whole.replace(/^0+(?=\d)/, '').replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${sign}${grouped}.${fraction.padEnd(2, '0')}`;
}

/** An amount of money from the API: a decimal string, shown exactly, with its currency (`-$1,234.50`, `12.00 EUR`). */
export function Money({ amount, currency = 'USD' }: { amount: string; currency?: string }) {
  const formatted = formatMoney(amount);
  if (currency !== 'USD') return <span className="money">{`${formatted} ${currency}`}</span>;
  const negative = formatted.startsWith('-');
  return <span className="money">{`${negative ? '-' : ''}$${negative ? formatted.slice(1) : formatted}`}</span>;
}
