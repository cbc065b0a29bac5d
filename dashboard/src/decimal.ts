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
