import { Fragment, useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';

const rateLimits = [
  { name: 'requests_per_minute', label: 'Requests per minute', hint: 'Per UTC minute.' },
  { name: 'tokens_per_minute', label: 'Tokens per minute', hint: 'Prompt and completion tokens per UTC minute.' },
  { name: 'max_concurrent', label: 'Requests at once', hint: 'Requests in progress at the same time.' },
] as const;

type RateLimitName = (typeof rateLimits)[number]['name'];

/**
 * A typed limit as the API takes it: empty is none (null), a number goes as a number, anything
 * else as typed, so that the API refuses it naming its field (one source for every message).
 */
function limitValue(typed: string): number | string | null {
  const trimmed = typed.trim();
  if (!trimmed) return null;
  return /^-?\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : trimmed;
}

/** The key's rate limits (docs/api/keys.md#rate-limits): requests and tokens per UTC minute, requests at once; each empty for none. */
export function RateLimitsSection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const [typed, setTyped] = useState<Record<RateLimitName, string>>(() => {
    const limits = keyRecord.rate_limits;
    return {
      requests_per_minute: limits.requests_per_minute?.toString() ?? '',
      tokens_per_minute: limits.tokens_per_minute?.toString() ?? '',
      max_concurrent: limits.max_concurrent?.toString() ?? '',
    };
  });
  const [saved, setSaved] = useState(false);
  const set = rateLimits.filter(({ name }) => keyRecord.rate_limits[name] !== null);
  const submit = async () => {
    setSaved(false);
    const limits = Object.fromEntries(rateLimits.map(({ name }) => [name, limitValue(typed[name])]));
    // The API replaces the whole set; none at all is sent as null, which removes them.
    const body = { rate_limits: Object.values(limits).every((value) => value === null) ? null : limits };
    await client.patch('/v1/keys/{key_id}', { params: { path: { key_id: keyRecord.key_id } }, body });
    setSaved(true);
    onChanged();
  };
  return (
    <Section title="Rate limits">
      {set.length === 0 ? (
        <p>No rate limits.</p>
      ) : (
        <dl className="facts" data-testid="rate-limits">
          {set.map(({ name, label }) => (
            <Fragment key={name}>
              <dt>{label}</dt>
              <dd>{keyRecord.rate_limits[name]?.toLocaleString()}</dd>
            </Fragment>
          ))}
        </dl>
      )}
      <p className="hint">Over a limit, requests are refused with 429 rate_limit_exceeded and a Retry-After, across every server at once.</p>
      {canManage && (
        <Form onSubmit={submit} submitLabel="Save rate limits" busyLabel="Saving…" label="Rate limits of the key">
          {rateLimits.map(({ name, label, hint }) => (
            <Field
              key={name}
              name={`rate_limits.${name}`}
              label={label}
              hint={`${hint} A whole number above 0; empty: no limit.`}
              inputMode="numeric"
              value={typed[name]}
              onChange={(value) => setTyped((current) => ({ ...current, [name]: value }))}
            />
          ))}
        </Form>
      )}
      {saved && <Notice>The rate limits are saved.</Notice>}
    </Section>
  );
}
