/**
 * Compares two non-negative decimal strings of the API (`"10"`, `"9.9999"`) exactly: −1, 0 or 1.
 * Amounts are never turned into floats to decide anything (a cap reached, a balance used up).
 */
export function compareDecimals(a: string, b: string): number {
  const [wholeA, fractionA] = split(a);
  const [wholeB, fractionB] = split(b);
  if (wholeA.length !== wholeB.length) return wholeA.length < wholeB.length ? -1 : 1;
  const width = Math.max(fractionA.length, fractionB.length);
  const digitsA = wholeA + fractionA.padEnd(width, '0');
  const digitsB = wholeB + fractionB.padEnd(width, '0');
  return digitsA === digitsB ? 0 : digitsA < digitsB ? -1 : 1;
}

function split(value: string): [string, string] {
  const [whole = '', fraction = ''] = value.trim().split('.');
  return [whole.replace(/^0+/, ''), fraction];
}

/** A decimal string of the API: sign, whole digits, fraction digits. */
const decimalString = /^(-?)(\d+)(?:\.(\d+))?$/;

/**
 * Formats a decimal string of the API (`"1234.5"`, `"-0.000125"`) without ever turning it into a
 * float: thousands separated, at least two decimals, every further digit kept.
 */
export function formatMoney(amount: string): string {
  const match = decimalString.exec(amount.trim());
  if (!match) return amount;
  const [, sign, whole, fraction = ''] = match;
  const grouped = whole.replace(/^0+(?=\d)/, '').replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${sign}${grouped}.${fraction.padEnd(2, '0')}`;
}

/**
 * A decimal string rounded to cents, half away from zero, in exact decimal arithmetic
 * (`"10.9999802"` → `"11.00"`, `"-0.004"` → `"0.00"`); an amount of at most two decimals is
 * given back as it is. Not a decimal string: given back unchanged.
 */
export function roundToCents(amount: string): string {
  const trimmed = amount.trim();
  const match = decimalString.exec(trimmed);
  if (!match) return amount;
  const [, sign, whole, fraction = ''] = match;
  if (fraction.length <= 2) return trimmed;
  const cents = BigInt(whole + fraction.slice(0, 2)) + (fraction[2] >= '5' ? 1n : 0n);
  const digits = cents.toString().padStart(3, '0');
  const rounded = `${digits.slice(0, -2)}.${digits.slice(-2)}`;
  return cents === 0n ? rounded : `${sign}${rounded}`;
}

/**
 * Whether `part` is at least `percent` % of `whole` (non-negative decimal strings), decided
 * exactly: `isAtLeastPercent("8", "10", 80)` is true, `"7.9999"` is not. A whole of zero is
 * reached by any part.
 */
export function isAtLeastPercent(part: string, whole: string, percent: number): boolean {
  const [wholeA, fractionA] = split(part);
  const [wholeB, fractionB] = split(whole);
  const width = Math.max(fractionA.length, fractionB.length);
  const a = BigInt(wholeA + fractionA.padEnd(width, '0') || '0');
  const b = BigInt(wholeB + fractionB.padEnd(width, '0') || '0');
  return a * 100n >= b * BigInt(percent);
}

/**
 * The exact sum of decimal strings of the API (`["0.0003", "0.21"]` → `"0.2103"`), in integer
 * arithmetic: as many decimals as the longest of them; `"0"` for none.
 */
export function sumDecimals(values: readonly string[]): string {
  let width = 0;
  const parsed: Array<{ negative: boolean; whole: string; fraction: string }> = [];
  for (const value of values) {
    const match = decimalString.exec(value.trim());
    if (!match) continue;
    const [, sign, whole, fraction = ''] = match;
    parsed.push({ negative: sign === '-', whole, fraction });
    width = Math.max(width, fraction.length);
  }
  let total = 0n;
  for (const { negative, whole, fraction } of parsed) {
    const units = BigInt(whole + fraction.padEnd(width, '0'));
    total += negative ? -units : units;
  }
  const negative = total < 0n;
  const digits = (negative ? -total : total).toString().padStart(width + 1, '0');
  const result = width === 0 ? digits : `${digits.slice(0, -width)}.${digits.slice(-width)}`;
  return negative ? `-${result}` : result;
}
