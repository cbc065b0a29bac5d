import { Decimal } from 'decimal.js';
import { invalidArgument } from './errors.js';

/**
 * Money (docs/conventions.md#money): decimal strings in and out, `numeric` in Postgres, decimal.js in between;
 * never a float. `Money` has enough significant digits that sums and products of our amounts
 * (at most 18 + 18 digits) never round, and prints in plain notation, never with an exponent.
 */
export const Money = Decimal.clone({ precision: 80, rounding: Decimal.ROUND_HALF_EVEN, toExpNeg: -80, toExpPos: 80 });
export type Money = InstanceType<typeof Money>;

/** Plain decimal notation (docs/conventions.md#money): digits, optionally a point and more digits. */
const plainDecimal = /^(\d+)(?:\.(\d+))?$/;

export interface DecimalLimits {
  /** Digits before the point, leading zeros included (default 18). */
  maxIntegerDigits?: number;
  /** Digits after the point (default 18). */
  maxFractionDigits?: number;
}

/**
 * A non-negative amount in plain decimal notation, returned exactly as given ("0.10" stays
 * "0.10"); 400 on `field` for anything else: a sign, an exponent, a missing digit before or
 * after the point, spaces, or more digits than the limits allow.
 */
export function parsePlainDecimal(raw: string, field: string, limits: DecimalLimits = {}): string {
  const { maxIntegerDigits = 18, maxFractionDigits = 18 } = limits;
  const match = plainDecimal.exec(raw);
  if (!match)
    throw invalidArgument(
      field,
      `${field} must be a decimal string such as "12.50" (digits, optionally a point and more digits; no sign, exponent or spaces).`,
    );
  if (match[1].length > maxIntegerDigits || (match[2]?.length ?? 0) > maxFractionDigits) {
    throw invalidArgument(field, `${field} may have at most ${maxIntegerDigits} digits before the point and ${maxFractionDigits} after it.`);
  }
  return raw;
}

/** An exact amount in its shortest plain form: "12.5", "0.000123", "0". */
export function formatMoney(value: Money | string): string {
  return new Money(value).toFixed();
}
