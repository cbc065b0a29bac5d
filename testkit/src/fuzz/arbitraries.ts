import fc from 'fast-check';
import { type Fact, forgedRef, type Party } from './world.js';

/**
 * Generated requests for every operation of the OpenAPI document (issue 11), shared by the
 * fuzz test (`e2e/platform/fuzz.test.ts`) and the long run (`npm run bench:fuzz`). Each
 * operation's path, query, headers and body are derived from its parameters and request schema
 * (types, enums, formats, bounds, required fields, examples, and the values its descriptions
 * quote), then, some of the time, made invalid: wrong types, missing and extra fields, huge,
 * control and unicode strings, deep nesting, malformed JSON, other content types, ids of the
 * other user, path tricks, bad or foreign credentials and workspaces.
 *
 * Values of the world (ids, tokens, emails) appear as placeholders (`{{b.poolKeyId}}`) that the
 * world resolves when the request is sent.
 */

// biome-ignore lint/suspicious/noExplicitAny: the document is walked as plain JSON.
export type Json = Record<string, any>;

export interface Operation {
  /** "POST /v1/keys". */
  label: string;
  method: string;
  template: string;
  op: Json;
}

/** A request to send, with placeholders. */
export interface FuzzRequest {
  method: string;
  /** The path, its variables filled (not yet resolved). */
  path: string;
  /** "" or "?…", already encoded. */
  query: string;
  headers: Record<string, string>;
  body?: string;
  /** The client address the gateway is told (X-Forwarded-For): every run its own, so per-address limits never blind the fuzzer. */
  clientIp: string;
}

const verbs = ['get', 'put', 'post', 'patch', 'delete'] as const;

/** Every operation of the document, in its order. */
export function operationsOf(doc: Json): Operation[] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([template, item]) =>
    verbs
      // The front door answers OpenAI's error shape, not the REST surface's contract this oracle
      // checks (docs/api/front-door.md); its refusals have tests of their own in e2e/data-plane.
      .filter((verb) => item[verb] && item[verb]['x-switchboard-component'] !== 'data-plane')
      .map((verb) => ({ label: `${verb.toUpperCase()} ${template}`, method: verb.toUpperCase(), template, op: item[verb] })),
  );
}

/** The schema a `$ref` names, followed until it is not one. */
export function deref(doc: Json, schema: Json | undefined): Json {
  let current = schema ?? {};
  while (typeof current.$ref === 'string')
    current = (current.$ref as string)
      .split('/')
      .slice(1)
      .reduce((node: Json, key) => node[key], doc);
  return current;
}

/** Values a description quotes in backticks: `local`, `global`, `revoked`… */
function quotedValues(description: unknown): string[] {
  return typeof description === 'string' ? [...description.matchAll(/`([\w.-]{1,40})`/g)].map((m) => m[1]) : [];
}

// --- Values of the world, by the name of the field or parameter that takes them -------------

/** Which facts of a party a path variable or an `…_id` field names. */
const idFacts: Record<string, Fact[]> = {
  org: ['personalWorkspace', 'teamOrg'],
  workspace: ['personalWorkspace', 'teamOrg'],
  invitation: ['invitationId'],
  user: ['userId'],
  key: ['poolKeyId', 'revokedKeyId'],
  conversation: ['conversationId'],
  message: ['messageId'],
  webhook: ['webhookId'],
  delivery: ['deliveryId'],
  checkout: ['checkoutId'],
  token: ['checkoutToken', 'refreshToken'],
};

/** The id prefixes of docs/conventions.md, for ids of the right kind that name nothing. */
const idPrefixes: Record<string, string> = {
  org: 'org_',
  workspace: 'org_',
  invitation: 'inv_',
  user: 'usr_',
  key: 'key_',
  conversation: 'conv_',
  message: 'msg_',
  webhook: 'wh_',
  delivery: 'dlv_',
  checkout: 'chk_',
  generation: 'gen_',
};

const allIdFacts: Fact[] = [...new Set(Object.values(idFacts).flat())];

/** "new_owner_user_id" → "user", "key_id" → "key", "token" → "token". */
function idKind(name: string): string | undefined {
  if (name === 'token' || name.endsWith('_token')) return 'token';
  const match = /(?:^|_)([a-z]+)_id$/.exec(name);
  return match?.[1];
}

const base62 = fc.string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'), minLength: 22, maxLength: 22 });

/** Strings that break naive code: control characters, NUL, lone surrogates, bidi, injections. */
const nastyStrings = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\u0007\u001b[31mred',
    '\r\n\r\nX-Injected: 1',
    '\ud800',
    'x\udfffy',
    '\u202eevil',
    '\ufeff',
    'emoji 😀👩‍👩‍👧',
    'ＡＢＣ',
    "'; DROP TABLE users; --",
    '" OR 1=1 --',
    '<script>alert(1)</script>',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a log4j-style lookup, sent as it is.
    '${jndi:ldap://127.0.0.1/x}',
    '{{self.session}}x',
    '../../../../etc/passwd',
    '%00',
    '%2e%2e%2f',
    'null',
    'undefined',
    'NaN',
    '-1',
    '9'.repeat(40),
    '__proto__',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
);

/** Values of any JSON type but the one expected. */
const wrongTypes = fc.constantFrom<unknown>(0, -1, 1.5, 1e308, true, false, null, '', 'text', [], [1, 'two'], {}, { nested: { deeper: [] } });

const hugeString = fc.integer({ min: 10_000, max: 200_000 }).map((n) => 'x'.repeat(n));

/** JSON text of an array or object nested `depth` deep (the parser's and the decoders' recursion), kept as text: too deep to stringify. */
const deeplyNested = fc
  .tuple(fc.constantFrom(20, 200, 5_000, 100_000), fc.boolean())
  .map(([depth, arrays]) => (arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`));

/**
 * Requests are generated for the roles `self` (the caller, when its credentials are valid) and
 * `other`, then given to a and b one way or the other: most ids a request names are the caller's
 * own, so it goes past the checks of visibility often enough to reach the handlers.
 */
type Role = 'self' | 'other';
const roleRef = (role: Role, fact: Fact) => `{{${role}.${fact}}}`;
const aRole = fc.oneof({ weight: 3, arbitrary: fc.constant<Role>('self') }, { weight: 1, arbitrary: fc.constant<Role>('other') });
const factOf = (facts: Fact[]) => fc.tuple(aRole, fc.constantFrom(...facts)).map(([role, fact]) => roleRef(role, fact));

/** Percent-encodes a path segment or query value, leaving its placeholders for the world to resolve. */
const encoded = (text: string) =>
  text
    .split(/(\{\{\w+(?:\.\w+)?\}\})/)
    .map((part, i) => (i % 2 === 1 ? part : encodeURIComponent(part.replace(/[\ud800-\udfff]/g, '?'))))
    .join('');

/** An id for a path variable or `…_id` field: the world's (either party's), of the right kind naming nothing, or garbage. */
function idValue(kind: string | undefined): fc.Arbitrary<string> {
  const facts = (kind && idFacts[kind]) || allIdFacts;
  const prefix = (kind && idPrefixes[kind]) ?? '';
  return fc.oneof(
    { weight: 8, arbitrary: factOf(facts) },
    { weight: 1, arbitrary: factOf(allIdFacts) },
    { weight: 2, arbitrary: base62.map((id) => `${prefix}${id}`) },
    { weight: 1, arbitrary: nastyStrings },
  );
}

const emails = fc.oneof(
  { weight: 4, arbitrary: factOf(['email', 'invitedEmail']) },
  { weight: 3, arbitrary: base62.map((id) => `fuzz-${id.toLowerCase()}@example.com`) },
  {
    weight: 2,
    arbitrary: fc.constantFrom('a@b', 'no-at-sign', '@example.com', 'UPPER@EXAMPLE.COM', 'ü@exämple.com', 'a b@example.com', `${'x'.repeat(300)}@example.com`),
  },
  { weight: 1, arbitrary: fc.emailAddress() },
);

/** Passwords the fuzzer may send: never a party's real one, so no run changes it or deactivates an account. */
const passwords = fc.oneof(
  { weight: 3, arbitrary: base62.map((s) => `fuzz passphrase ${s}`) },
  { weight: 1, arbitrary: fc.constantFrom('123', 'password', 'correct horse battery staple', 'x'.repeat(5_000), 'pässwörd ünïcode 12345') },
);

/** Money (docs/conventions.md): decimal strings, also numbers where a top-up accepts them, and every way to get them wrong. */
const money = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('0', '5', '12.50', '0.01', '10000', '9999.99', '0.000123', 12.5, 5) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<unknown>(
      '-1',
      -5,
      0,
      '1e3',
      1e308,
      '12.345',
      ' 5',
      '5 ',
      '1.',
      '.5',
      'NaN',
      'Infinity',
      '0x10',
      '９',
      '99999999999999999999999999999999999999',
      '1'.repeat(5_000),
      '',
    ),
  },
  { weight: 1, arbitrary: fc.double() },
);

/** Webhook URLs: loopback only (the mesh refuses to deliver there), so no fuzz run ever sends traffic off the machine. */
const urls = fc.oneof(
  { weight: 3, arbitrary: fc.nat({ max: 65_535 }).map((port) => `https://127.0.0.1:${port}/fuzz`) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'https://localhost/fuzz',
      'https://[::1]/fuzz',
      'http://127.0.0.1/fuzz',
      'https://127.0.0.1:99999/',
      'https://user:pass@127.0.0.1/',
      'ftp://127.0.0.1/fuzz',
      'javascript:alert(1)',
      'file:///etc/passwd',
      'https://',
      'not a url',
      `https://127.0.0.1/${'a'.repeat(5_000)}`,
    ),
  },
);

const sixDigits = fc.integer({ min: 0, max: 999_999 }).map((n) => String(n).padStart(6, '0'));

/** A value chosen by a field's name, when the name says what it holds better than its type does. */
function byName(name: string): fc.Arbitrary<unknown> | undefined {
  if (name === 'email' || name.endsWith('_email')) return emails;
  if (name.includes('password')) return passwords;
  if (name.endsWith('_usd')) return money;
  if (name === 'url' || name.endsWith('_url')) return urls;
  if (name === 'code' || name === 'recovery_code') return fc.oneof(sixDigits, base62, nastyStrings);
  const kind = idKind(name);
  if (kind) return fc.oneof({ weight: 4, arbitrary: idValue(kind) }, { weight: 1, arbitrary: base62 });
  return undefined;
}

// --- Schemas → values ----------------------------------------------------------------------

/** A valid value of `schema` (a field named `name`), with the example value and quoted values as seeds. */
function fieldValue(doc: Json, raw: Json | undefined, name: string, example: unknown, depth = 0): fc.Arbitrary<unknown> {
  const schema = deref(doc, raw);
  const seeds: fc.Arbitrary<unknown>[] = [];
  if (example !== undefined) seeds.push(fc.constant(example));
  const quoted = quotedValues(raw?.description ?? schema.description);
  if (quoted.length > 0) seeds.push(fc.constantFrom(...quoted));
  const named = byName(name);
  const typed = typedValue(doc, schema, name, example, depth);
  const choices = [
    ...seeds.map((arbitrary) => ({ weight: 2, arbitrary })),
    ...(named ? [{ weight: 4, arbitrary: named }] : []),
    { weight: 2, arbitrary: typed },
  ];
  return fc.oneof(...choices);
}

function typedValue(doc: Json, schema: Json, name: string, example: unknown, depth: number): fc.Arbitrary<unknown> {
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if (Array.isArray(schema.anyOf)) return fc.oneof(...(schema.anyOf as Json[]).map((branch) => typedValue(doc, deref(doc, branch), name, example, depth)));
  const types: string[] = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (types.length > 1) return fc.oneof(...types.map((type) => typedValue(doc, { ...schema, type }, name, example, depth)));
  switch (types[0]) {
    case 'string':
      if (schema.format === 'date-time')
        return fc.date({ min: new Date('1970-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString());
      return fc.oneof(fc.string({ minLength: 1, maxLength: 30 }), base62);
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 100_000 });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const itemExample = Array.isArray(example) ? example[0] : undefined;
      return fc.array(fieldValue(doc, schema.items, name, itemExample, depth + 1), { maxLength: 4 });
    }
    case 'object':
      if (schema.properties && depth < 3) return objectOf(doc, schema, example, depth + 1);
      return fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 });
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** A valid object of `schema`: its required properties always, the others some of the time. */
function objectOf(doc: Json, schema: Json, example: unknown, depth = 0): fc.Arbitrary<Json> {
  const examples = { ...(Array.isArray(schema.examples) ? schema.examples[0] : {}), ...(example && typeof example === 'object' ? example : {}) } as Json;
  const properties = (schema.properties ?? {}) as Record<string, Json>;
  const model = Object.fromEntries(Object.entries(properties).map(([key, property]) => [key, fieldValue(doc, property, key, examples[key], depth)]));
  return fc.record(model, { requiredKeys: ((schema.required ?? []) as string[]).filter((key) => key in model) }) as fc.Arbitrary<Json>;
}

/** A copy of `value` whose strings are replaced by `strings`, in turn. */
function withStrings(value: unknown, strings: string[], state = { next: 0 }): unknown {
  if (typeof value === 'string') return strings[state.next++ % strings.length];
  if (Array.isArray(value)) return value.map((item) => withStrings(item, strings, state));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, withStrings(item, strings, state)]));
  return value;
}

/** One way to make a valid body invalid. */
function mutated(valid: fc.Arbitrary<Json>, schema: Json): fc.Arbitrary<unknown> {
  const keys = Object.keys(schema.properties ?? {});
  const required = (schema.required ?? []) as string[];
  const someKey = keys.length > 0 ? fc.constantFrom(...keys) : fc.constant('unknown_field');
  const setKey = (value: fc.Arbitrary<unknown>) => fc.tuple(valid, someKey, value).map(([body, key, v]) => ({ ...body, [key]: v }));
  return fc.oneof(
    setKey(wrongTypes),
    { weight: 2, arbitrary: setKey(nastyStrings) },
    // Every string of the body, nested ones too (metadata values, list items), made nasty.
    { weight: 2, arbitrary: fc.tuple(valid, fc.array(nastyStrings, { minLength: 1, maxLength: 5 })).map(([body, values]) => withStrings(body, values)) },
    setKey(hugeString),
    // Numbers as strings and strings as numbers.
    fc.tuple(valid, someKey).map(([body, key]) => {
      const value: unknown = body[key];
      if (typeof value === 'number') return { ...body, [key]: String(value) };
      return { ...body, [key]: typeof value === 'string' && Number.isFinite(Number(value)) ? Number(value) : 42 };
    }),
    required.length > 0
      ? fc.tuple(valid, fc.constantFrom(...required)).map(([body, key]) => Object.fromEntries(Object.entries(body).filter(([k]) => k !== key)))
      : valid,
    fc
      .tuple(
        valid,
        fc.dictionary(
          fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('__proto__', 'constructor', 'prototype', 'workspace_id', 'user_id', 'role')),
          fc.jsonValue({ maxDepth: 3 }),
          { minKeys: 1, maxKeys: 4 },
        ),
      )
      .map(([body, extra]) => ({ ...body, ...extra })),
    fc
      .tuple(valid, fc.integer({ min: 1_000, max: 20_000 }))
      .map(([body, n]) => ({ ...body, ...Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i])) })),
  );
}

/** JSON text that is not JSON, or JSON that is not an object. */
const brokenBodies = fc.oneof(
  fc.constantFrom(
    '{',
    '{"a":}',
    '{"a":1,}',
    "{'a':1}",
    'nul',
    '\ufeff{}',
    '{"a":"\\ud800"}',
    '{"a":1}{"b":2}',
    '\u0000',
    '[]',
    'null',
    '0',
    '"text"',
    'true',
    '{"__proto__":{"admin":true}}',
  ),
  fc.string({ unit: 'binary', maxLength: 60 }),
);

/** The body of a request (raw text) and the content type it is sent with. */
function bodyOf(doc: Json, operation: Operation): fc.Arbitrary<{ body?: string; contentType?: string }> {
  const media = operation.op.requestBody?.content?.['application/json'];
  const schema = deref(doc, media?.schema);
  const hasSchema = media && Object.keys(schema).length > 0;
  const valid: fc.Arbitrary<Json> = hasSchema ? objectOf(doc, schema, media.example) : fc.constant({});
  const json = hasSchema
    ? fc.oneof({ weight: 6, arbitrary: valid }, { weight: 4, arbitrary: mutated(valid, schema) })
    : fc.oneof({ weight: 3, arbitrary: fc.jsonValue({ maxDepth: 2 }) }, { weight: 1, arbitrary: fc.constant({}) });
  const deepKey = fc.constantFrom(...Object.keys(schema.properties ?? {}), 'unknown_field');
  const text = fc.oneof(
    { weight: 12, arbitrary: json.map((value) => JSON.stringify(value) ?? 'null') },
    {
      weight: 1,
      arbitrary: fc
        .tuple(valid, deepKey, deeplyNested)
        .map(([body, key, nested]) => JSON.stringify({ ...body, [key]: 0 }).replace(`${JSON.stringify(key)}:0`, `${JSON.stringify(key)}:${nested}`)),
    },
    { weight: 1, arbitrary: brokenBodies },
    { weight: 1, arbitrary: fc.constant('') },
    // Over the 1 MiB limit.
    { weight: 1, arbitrary: fc.constant(JSON.stringify({ blob: 'x'.repeat(1024 * 1024 + 10) })) },
  );
  const contentType = fc.oneof(
    { weight: 12, arbitrary: fc.constant('application/json') },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        'application/json; charset=utf-8',
        'APPLICATION/JSON',
        'application/merge-patch+json',
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/xml',
        'application/jsonx',
        'json',
        '',
      ),
    },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
  // A GET has no body (fetch refuses one); DELETEs get one now and then: ignored or refused, never a crash.
  if (operation.method === 'GET') return fc.constant({});
  if (!operation.op.requestBody) {
    return fc.oneof({ weight: 8, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: fc.record({ body: text, contentType }) });
  }
  return fc.oneof({ weight: 12, arbitrary: fc.record({ body: text, contentType }) }, { weight: 1, arbitrary: fc.constant({}) });
}

// --- Paths, queries, headers ---------------------------------------------------------------

const pathTricks = fc.constantFrom(
  '..',
  '.',
  '%2F',
  '..%2F..%2Fv1%2Faccount',
  '%2e%2e',
  '%00',
  '%20',
  '%E2%80%AE',
  '%ZZ',
  '~',
  'x'.repeat(5_000),
  '%F0%9F%98%80',
  ';x=1',
  'a%2Fb',
);

function pathOf(operation: Operation): fc.Arbitrary<string> {
  const parts = operation.template.split(/(\{[a-z_]+\})/).map((part) => {
    const variable = /^\{([a-z_]+)\}$/.exec(part);
    if (!variable) return fc.constant(part);
    const kind = variable[1] === 'token' ? 'token' : idKind(variable[1]);
    return fc.oneof(
      { weight: 10, arbitrary: idValue(kind).map(encoded) },
      { weight: 1, arbitrary: pathTricks },
      { weight: 1, arbitrary: fc.tuple(idValue(kind), pathTricks).map(([id, trick]) => `${encoded(id)}${trick}`) },
    );
  });
  return fc.tuple(...parts).map((values) => values.join(''));
}

/**
 * Cursors of the form the lists issue (runtime/src/pagination.ts: base64url of
 * `<microseconds>.<id>`), at the edges of time: they pass the parser and reach the queries.
 */
const cursors = fc
  .tuple(
    fc.oneof(
      fc.constantFrom('0', '1', '253402300799999999', '253402300800000000', '99999999999999999999', '00000000000000000001'),
      fc.bigInt({ min: 0n, max: 253_402_300_799_999_999n }).map(String),
    ),
    fc.oneof(
      base62,
      base62.map((id) => `key_${id}`),
      fc.constantFrom('a', '_', '0'),
    ),
  )
  .map(([micros, id]) => Buffer.from(`${micros}.${id}`).toString('base64url'));

/** A query parameter's value: valid for its schema, or not. */
function queryValue(doc: Json, parameter: Json): fc.Arbitrary<string> {
  const schema = deref(doc, parameter.schema);
  const quoted = quotedValues(parameter.description);
  const valid: fc.Arbitrary<string>[] = [];
  if (schema.type === 'integer') valid.push(fc.integer({ min: schema.minimum ?? 0, max: schema.maximum ?? 1_000 }).map(String));
  if (quoted.length > 0) valid.push(fc.constantFrom(...quoted));
  if (parameter.name === 'after') valid.push(factOf(allIdFacts), base62, cursors);
  if (valid.length === 0) valid.push(fc.string({ maxLength: 20 }));
  const invalid = fc.oneof(
    fc.constantFrom('0', '-1', '101', '366', '1.5', '1e2', 'abc', '', ' 1', '0x10', '99999999999999999999', 'true', '[]'),
    nastyStrings,
    hugeString.map((s) => s.slice(0, 8_000)),
  );
  return fc.oneof({ weight: 3, arbitrary: fc.oneof(...valid) }, { weight: 1, arbitrary: invalid });
}

function queryOf(doc: Json, operation: Operation): fc.Arbitrary<string> {
  const parameters = ((operation.op.parameters ?? []) as Json[]).filter((p) => p.in === 'query');
  const pairs = parameters.map((p) =>
    fc.option(
      fc.array(queryValue(doc, p), { minLength: 1, maxLength: 3 }).map((values) => values.map((v) => [p.name as string, v] as const)),
      { freq: 2 },
    ),
  );
  // Credentials in the URL must be ignored (docs/conventions.md).
  const unknown = fc.option(
    fc.tuple(fc.constantFrom('foo', 'limit[]', 'access_token', 'api_key', '__proto__', 'x'.repeat(300)), fc.oneof(nastyStrings, factOf(['session', 'apiKey']))),
    { freq: 6 },
  );
  return fc.tuple(fc.tuple(...pairs), unknown).map(([given, extra]) => {
    const all = [...given.flatMap((list) => list ?? []), ...(extra ? [extra] : [])];
    return all.length > 0 ? `?${all.map(([name, value]) => `${encoded(name)}=${encoded(value)}`).join('&')}` : '';
  });
}

/** Authorization headers: the parties' credentials, and every way a credential can be wrong. */
const badAuthorizations = fc.oneof(
  fc.constantFrom(
    `Bearer ${roleRef('self', 'revokedKey')}`,
    `Bearer ${forgedRef('forgedJwt')}`,
    `Bearer ${forgedRef('expiredJwt')}`,
    `Bearer ${forgedRef('unsignedJwt')}`,
    `bearer ${roleRef('self', 'session')}`,
    `Bearer  ${roleRef('self', 'session')}`,
    `Bearer ${roleRef('self', 'session')}x`,
    `Bearer ${roleRef('self', 'refreshToken')}`,
    `Basic ${Buffer.from('a:b').toString('base64')}`,
    'Bearer',
    'Bearer ',
    'Bearer sb_',
    'Bearer sb_live_0000000000000000',
    'Bearer eyJ.eyJ.',
    `Bearer ${'x'.repeat(8_000)}`,
    `${roleRef('self', 'apiKey')}`,
  ),
  base62.map((s) => `Bearer sb_${s}`),
  nastyStrings.map((s) => `Bearer ${s.replace(/[^\t\x20-\x7e]/g, '')}`),
);

function authorizationOf(operation: Operation): fc.Arbitrary<string | undefined> {
  // Mostly the credentials no run can revoke; the pool key's id is offered to requests, so it may be revoked or capped.
  const valid = fc
    .constantFrom<Fact>('session', 'session', 'session', 'apiKey', 'apiKey', 'poolKey')
    .map((fact) => `Bearer ${roleRef('self', fact)}` as string | undefined);
  const open = operation.op['x-switchboard-access']?.credentials === 'none';
  return fc.oneof(
    { weight: open ? 1 : 16, arbitrary: valid },
    { weight: open ? 6 : 3, arbitrary: fc.constant(undefined) },
    { weight: 3, arbitrary: badAuthorizations },
  );
}

const workspaceHeaders = fc.oneof(
  { weight: 8, arbitrary: fc.constant(undefined) },
  { weight: 6, arbitrary: factOf(['personalWorkspace', 'teamOrg']) },
  { weight: 1, arbitrary: base62.map((id) => `org_${id}`) },
  { weight: 1, arbitrary: fc.oneof(factOf(allIdFacts), fc.constantFrom('', ' ', 'null', 'x'.repeat(3_000), 'org_, org_')) },
);

const requestIds = fc.oneof(
  { weight: 10, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.stringMatching(/^[\w.:-]{1,128}$/) },
  { weight: 1, arbitrary: fc.constantFrom('', 'has space', 'x'.repeat(129), 'a/b', 'req_"quoted"') },
);

/**
 * Other headers: Idempotency-Key variants (docs/conventions.md#idempotency: a malformed one is a 400 on a POST, a
 * reused one a replay or a 422), huge ones, odd ones.
 */
const extraHeaders: fc.Arbitrary<Record<string, string>> = fc.oneof(
  { weight: 10, arbitrary: fc.constant({}) },
  { weight: 1, arbitrary: fc.oneof(base62, fc.constantFrom('', 'x'.repeat(300), roleRef('other', 'checkoutId'))).map((key) => ({ 'idempotency-key': key })) },
  { weight: 1, arbitrary: fc.integer({ min: 4_000, max: 40_000 }).map((n) => ({ 'x-padding': 'p'.repeat(n) })) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<Record<string, string>>(
      { 'x-forwarded-proto': 'https' },
      { 'x-http-method-override': 'DELETE' },
      { accept: 'text/html' },
      { 'accept-encoding': 'gzip' },
    ),
  },
);

/** One client address per run, in the documentation range (it is only a header: nothing is sent there). */
const clientIps = fc
  .tuple(fc.nat({ max: 0xffff }), fc.nat({ max: 0xffff }), fc.nat({ max: 0xffff }))
  .map(([x, y, z]) => `2001:db8:${x.toString(16)}:${y.toString(16)}:${z.toString(16)}::1`);

/** Header parameters of the document (a provider's signature): a value of the right look, garbage, or none. */
function documentedHeaders(operation: Operation): fc.Arbitrary<Record<string, string>> {
  const parameters = ((operation.op.parameters ?? []) as Json[]).filter((p) => p.in === 'header');
  const value = fc.oneof(
    fc.constantFrom(`t=1700000000,v1=${'a'.repeat(64)}`, `t=${'9'.repeat(30)},v1=`, 't=,v1=,v0=', 'garbage', ''),
    base62,
    nastyStrings.map((s) => s.replace(/[^\t\x20-\x7e]/g, '')),
  );
  return fc
    .tuple(
      ...parameters.map((p) =>
        fc.option(
          value.map((v) => [p.name as string, v] as const),
          { freq: 4 },
        ),
      ),
    )
    .map((pairs) => Object.fromEntries(pairs.filter((pair) => pair !== null)));
}

/** Now and then another method (405, or another route of the path), or the path without /v1 (the unversioned aliases). */
const otherMethods = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS');

/** Every request the fuzzer may send to `operation`. */
export function requestArbitrary(doc: Json, operation: Operation): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({
      method: fc.oneof({ weight: 30, arbitrary: fc.constant(operation.method) }, { weight: 1, arbitrary: otherMethods }),
      versioned: fc.oneof({ weight: 12, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
      documented: documentedHeaders(operation),
      path: pathOf(operation),
      query: queryOf(doc, operation),
      authorization: authorizationOf(operation),
      workspace: workspaceHeaders,
      requestId: requestIds,
      extra: extraHeaders,
      body: bodyOf(doc, operation),
      clientIp: clientIps,
      self: fc.constantFrom<Party>('a', 'b'),
    })
    .map(({ method, versioned, documented, path, query, authorization, workspace, requestId, extra, body: given, clientIp, self }) => {
      const other: Party = self === 'a' ? 'b' : 'a';
      const cast = (text: string) => text.replaceAll('{{self.', `{{${self}.`).replaceAll('{{other.', `{{${other}.`);
      const headers: Record<string, string> = Object.fromEntries(Object.entries({ ...documented, ...extra }).map(([name, value]) => [name, cast(value)]));
      // A GET or HEAD has no body (fetch refuses one).
      const body = method === 'GET' || method === 'HEAD' ? {} : given;
      if (authorization !== undefined) headers.authorization = cast(authorization);
      if (workspace !== undefined) headers['x-workspace-id'] = cast(workspace);
      if (requestId !== undefined) headers['x-request-id'] = requestId;
      if (body.contentType !== undefined && body.body !== undefined) headers['content-type'] = body.contentType;
      // Over the header limit the gateway answers 431 and closes before reading a body, so the
      // client's write of one fails: only body-less requests carry oversized headers.
      if (body.body !== undefined && headers['x-padding']) headers['x-padding'] = headers['x-padding'].slice(0, 4_000);
      return {
        method,
        path: cast(versioned ? path : path.replace(/^\/v1(?=\/)/, '')),
        query: cast(query),
        headers,
        ...(body.body !== undefined ? { body: cast(body.body) } : {}),
        clientIp,
      };
    });
}
