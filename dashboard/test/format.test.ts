import { describe, expect, it } from 'vitest';
import { compareDecimals, formatMoney, isAtLeastPercent, roundToCents } from '../src/decimal.js';
import { labelFieldMessage } from '../src/field-label.js';
import { nextAttemptWording } from '../src/pages/webhooks/next-attempt.js';

/**
 * The dashboard's pure rules: money shown exactly or to cents (never through floats), API field
 * names in an error replaced by the form's labels, and the tense of a webhook delivery's next attempt.
 */

describe('money', () => {
  it('formats decimal strings exactly, grouped, with at least two decimals', () => {
    expect(formatMoney('10.9999802')).toBe('10.9999802');
    expect(formatMoney('1234567.5')).toBe('1,234,567.50');
    expect(formatMoney('-0.000125')).toBe('-0.000125');
    expect(formatMoney('007')).toBe('7.00');
    expect(formatMoney('n/a')).toBe('n/a');
  });

  it('rounds to cents half away from zero in decimal arithmetic', () => {
    expect(roundToCents('10.9999802')).toBe('11.00');
    expect(roundToCents('0.7897')).toBe('0.79');
    expect(roundToCents('0.7849999')).toBe('0.78');
    expect(roundToCents('0.005')).toBe('0.01');
    expect(roundToCents('0.0049')).toBe('0.00');
    expect(roundToCents('-2.345')).toBe('-2.35');
    expect(roundToCents('-0.004')).toBe('0.00');
    expect(roundToCents('999.995')).toBe('1000.00');
    // Floats would say 1.00 here (1.005 is 1.00499999… as a double).
    expect(roundToCents('1.005')).toBe('1.01');
    expect(roundToCents('12.5')).toBe('12.5');
    expect(roundToCents('3')).toBe('3');
  });

  it('compares and decides shares of a cap exactly', () => {
    expect(compareDecimals('10', '9.9999')).toBe(1);
    expect(compareDecimals('0.10', '0.1')).toBe(0);
    expect(isAtLeastPercent('8', '10', 80)).toBe(true);
    expect(isAtLeastPercent('7.9999', '10', 80)).toBe(false);
    expect(isAtLeastPercent('0.000008', '0.00001', 80)).toBe(true);
    expect(isAtLeastPercent('12', '10', 80)).toBe(true);
    expect(isAtLeastPercent('0', '0', 80)).toBe(true);
    expect(isAtLeastPercent('0', '5', 80)).toBe(false);
  });
});

describe('field labels in API errors', () => {
  it('names a snake_case field by its label, at the start and inside a sentence', () => {
    expect(labelFieldMessage('monthly_spend_cap_usd must be a decimal of at most 2 places.', 'monthly_spend_cap_usd', 'Monthly cap (USD)')).toBe(
      'Monthly cap (USD) must be a decimal of at most 2 places.',
    );
    expect(labelFieldMessage('The value of amount_usd is below the minimum.', 'amount_usd', 'Amount (USD)')).toBe(
      'The value of amount (USD) is below the minimum.',
    );
    expect(labelFieldMessage('Set threshold_pct with alert_url.', 'alert_url', 'URL of the alerts')).toBe('Set threshold_pct with URL of the alerts.');
  });

  it('leaves one-word names, words that merely contain the name, and messages without it alone', () => {
    expect(labelFieldMessage('The invitation token is not valid.', 'token', 'Invitation token')).toBe('The invitation token is not valid.');
    expect(labelFieldMessage('url must use https.', 'url', 'Endpoint URL')).toBe('url must use https.');
    expect(labelFieldMessage('my_amount_usd and amount_usds are other words.', 'amount_usd', 'Amount')).toBe('my_amount_usd and amount_usds are other words.');
    expect(labelFieldMessage('Too short.', 'new_password', 'New password')).toBe('Too short.');
    expect(labelFieldMessage('grace_period_seconds[0] is unknown.', 'grace_period_seconds', 'Grace period')).toBe('Grace period[0] is unknown.');
  });
});

describe("a webhook delivery's next attempt", () => {
  const now = Date.parse('2026-11-25T19:00:00Z');
  it('is a retry to come, or one under way, for a failed delivery', () => {
    expect(nextAttemptWording('failed', '2026-11-25T19:09:00Z', now)).toBe('next retry at');
    expect(nextAttemptWording('failed', '2026-11-25T18:59:00Z', now)).toBe('retrying since');
  });
  it('is an attempt for any other, and nothing when none is planned', () => {
    expect(nextAttemptWording('pending', '2026-11-25T19:00:30Z', now)).toBe('next attempt at');
    expect(nextAttemptWording('succeeded', '2026-11-25T18:00:00Z', now)).toBe('next attempt due since');
    expect(nextAttemptWording('exhausted', null, now)).toBeUndefined();
  });
});
