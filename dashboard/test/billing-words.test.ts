import { describe, expect, it } from 'vitest';
import { cardExpiry, cardLabel, disabledReasonText, ledgerTypeLabel, usageReferenceLabel } from '../src/pages/billing/ledger-words.js';
import { monthLabel, monthOf, recentMonths } from '../src/pages/billing/months.js';

/** The billing page's words: ledger entry types and references, saved cards, why auto top-up went off, and the statement's months (UTC). */

describe('the ledger in words', () => {
  it('names each entry type, and leaves an unknown one as the API names it', () => {
    expect(ledgerTypeLabel('auto_topup')).toBe('Auto top-up');
    expect(ledgerTypeLabel('free_credit')).toBe('Free credit');
    expect(ledgerTypeLabel('dispute')).toBe('Lost dispute');
    expect(ledgerTypeLabel('plan_fee')).toBe('Plan fee');
    expect(ledgerTypeLabel('something_new')).toBe('something_new');
  });

  it("reads a usage entry's reference as its tier and UTC day; any other reference is not usage", () => {
    expect(usageReferenceLabel('usage:2026-11-24:fast')).toBe('Fast tier, 2026-11-24 (UTC)');
    expect(usageReferenceLabel('usage:2026-11-24:byok')).toBe('Your own provider key tier, 2026-11-24 (UTC)');
    expect(usageReferenceLabel('chk_9pW2sK7dLm4QrX8tVb3NcJ')).toBeUndefined();
  });

  it('explains why the service switched auto top-up off', () => {
    expect(disabledReasonText('charge_failures')).toMatch(/after 3 failed charges in a row/);
    expect(disabledReasonText('payment_method_removed')).toMatch(/its card was removed/);
    expect(disabledReasonText('other')).toBe('Auto top-up was switched off by the service (other).');
  });
});

describe('saved cards', () => {
  it('names a card by brand and last four digits, with its expiry as printed', () => {
    expect(cardLabel('visa', '4242')).toBe('Visa •••• 4242');
    expect(cardLabel('amex', '0005')).toBe('American Express •••• 0005');
    expect(cardLabel('newbrand', '1111')).toBe('Newbrand •••• 1111');
    expect(cardExpiry(3, 2030)).toBe('03/2030');
    expect(cardExpiry(12, 2031)).toBe('12/2031');
  });
});

describe("the statement's months", () => {
  it('takes the month in UTC, whatever the local time zone', () => {
    expect(monthOf(new Date('2026-11-30T23:59:59Z'))).toBe('2026-11');
    expect(monthOf(new Date('2026-12-01T00:00:00Z'))).toBe('2026-12');
  });

  it('offers the months up to the current one, newest first, across a year', () => {
    expect(recentMonths(new Date('2026-02-15T12:00:00Z'), 4)).toEqual(['2026-02', '2026-01', '2025-12', '2025-11']);
    // The 31st: months are counted from the first, never overflowing into the next.
    expect(recentMonths(new Date('2026-03-31T12:00:00Z'), 2)).toEqual(['2026-03', '2026-02']);
  });

  it('names a month in words', () => {
    expect(monthLabel('2026-11', 'en-US')).toBe('November 2026');
    expect(monthLabel('2026-01', 'en-US')).toBe('January 2026');
    expect(monthLabel('not a month')).toBe('not a month');
  });
});
