import { SwitchboardError } from '@switchboard/sdk';
import { describe, expect, it } from 'vitest';
import { indexInList, retargetFieldError } from '../src/error-fields.js';
import { labelFieldMessage } from '../src/field-label.js';
import { isExpired, percentsLabel, scopesLabel } from '../src/pages/keys/key-words.js';

/** The key page's words, and how an API error about an element of a list the page builds finds its input. */

describe('a key in words', () => {
  it('names the scopes in the order of the pages, whatever the order given', () => {
    expect(scopesLabel(['manage', 'inference'])).toBe('Inference, Manage');
    expect(scopesLabel(['inference', 'read', 'manage'])).toBe('Inference, Read, Manage');
    expect(scopesLabel([])).toBe('');
  });

  it('says the thresholds as a list of percents', () => {
    expect(percentsLabel([50, 80, 100])).toBe('50%, 80% and 100%');
    expect(percentsLabel([100])).toBe('100%');
    expect(percentsLabel([])).toBe('');
  });

  it('takes a key as expired from its expiry on, and never without one', () => {
    const now = Date.parse('2026-11-26T08:00:00Z');
    expect(isExpired('2026-11-26T08:00:00Z', now)).toBe(true);
    expect(isExpired('2026-11-26T08:00:01Z', now)).toBe(false);
    expect(isExpired(null, now)).toBe(false);
  });
});

describe('an error about an element of a list', () => {
  const error = (field: string, message: string) => new SwitchboardError({ status: 400, code: 'invalid_request', message, field, requestId: 'req_1' });

  it('finds the index of `name[i]` and `name[i].rest`, and nothing for another field', () => {
    expect(indexInList('spend_limits[1].amount_usd', 'spend_limits')).toBe(1);
    expect(indexInList('allowed_models[12]', 'allowed_models')).toBe(12);
    expect(indexInList('spend_limits', 'spend_limits')).toBeUndefined();
    expect(indexInList('thresholds_pct[0]', 'spend_limits')).toBeUndefined();
  });

  it("moves it to the input named, with the message naming that input's label", () => {
    const moved = retargetFieldError(error('spend_limits[1].amount_usd', 'spend_limits[1].amount_usd must be a plain decimal string.'), () => ({
      field: 'spend_limits.week.amount_usd',
    }));
    expect(moved).toBeInstanceOf(SwitchboardError);
    const { field, message, requestId, status } = moved as SwitchboardError;
    expect({ field, requestId, status }).toEqual({ field: 'spend_limits.week.amount_usd', requestId: 'req_1', status: 400 });
    expect(labelFieldMessage(message, 'spend_limits.week.amount_usd', 'Weekly budget in USD')).toBe('Weekly budget in USD must be a plain decimal string.');
  });

  it('words the element in the message when one input holds the whole list', () => {
    const moved = retargetFieldError(error('allowed_models[1]', 'allowed_models[1] is longer than 200 characters.'), () => ({
      field: 'allowed_models',
      mention: 'Line 2 of allowed_models',
    })) as SwitchboardError;
    expect(moved.field).toBe('allowed_models');
    expect(labelFieldMessage(moved.message, 'allowed_models', 'Allowed models')).toBe('Line 2 of allowed models is longer than 200 characters.');
  });

  it('leaves alone an error the target does not map, one without a field, and anything not an API error', () => {
    const other = error('name', 'name is empty.');
    expect(retargetFieldError(other, () => undefined)).toBe(other);
    const unfielded = new SwitchboardError({ status: 409, code: 'key_revoked', message: 'The key is revoked.' });
    expect(retargetFieldError(unfielded, () => ({ field: 'x' }))).toBe(unfielded);
    const network = new TypeError('fetch failed');
    expect(retargetFieldError(network, () => ({ field: 'x' }))).toBe(network);
  });
});
