import { type DescField, type DescMessage, getOption, hasOption, ScalarType } from '@bufbuild/protobuf';
import { type FieldRules, field as fieldRules, Ignore } from '@switchboard/contracts/buf/validate/validate_pb';
import { field as fieldOption } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { buildRoutes, type Route } from '@switchboard/gateway/routes';
import { eventually } from '@switchboard/runtime/testing';
import { meshSuiteOfFile, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * The input rules of the protos (docs/conventions.md#input-rules), through the gateway: for every
 * annotated request field of every REST route, a value that breaks its rule is a 400
 * `invalid_request` naming the field, sent by a principal allowed to call the route and on an
 * object it can see (so the 404 and 403 that come first do not hide it); and the API reference
 * states the same rule on that field.
 */

// The demo upstream answers a chat completion, whose generation the feedback route rates.
const suite = meshSuiteOfFile(() => ({ DEMO_UPSTREAM: 'true' }));

/** A value that breaks a rule, and the field the 400 must name. */
interface Violation {
  value: unknown;
  field: string;
  rule: string;
}

const rulesOf = (field: DescField): FieldRules | undefined => (hasOption(field, fieldRules) ? getOption(field, fieldRules) : undefined);

/** A value that keeps `rules` (for the fields beside the one under test). */
function validValue(rules: FieldRules): unknown {
  const type = rules.type;
  switch (type.case) {
    case 'string':
      if (type.value.in.length > 0) return type.value.in[0];
      // A pattern skipped when empty (group_by) keeps its rule left out; the others are the decimal pattern.
      if (type.value.pattern) return rules.ignore === Ignore.IF_ZERO_VALUE ? undefined : '1';
      return 'x';
    case 'int32':
      if (type.value.in.length > 0) return type.value.in[0];
      return type.value.greaterThan.case === 'gte' ? type.value.greaterThan.value : 1;
    default:
      return undefined;
  }
}

/** Values breaking the rules of a string or int32 (one per rule), as they would appear at `path`. */
function scalarViolations(rules: FieldRules, path: string): Violation[] {
  const type = rules.type;
  const out: Violation[] = [];
  if (type.case === 'string') {
    const r = type.value;
    if (r.in.length > 0) out.push({ value: 'not-one-of-them', field: path, rule: 'string.in' });
    if (r.minLen > 0n) out.push({ value: '', field: path, rule: 'string.min_len' });
    if (r.maxLen > 0n) out.push({ value: 'x'.repeat(Number(r.maxLen) + 1), field: path, rule: 'string.max_len' });
    if (r.pattern) out.push({ value: '-1', field: path, rule: 'string.pattern' });
  } else if (type.case === 'int32') {
    const r = type.value;
    if (r.in.length > 0) out.push({ value: Math.max(...r.in) + 1, field: path, rule: 'int32.in' });
    if (r.greaterThan.case === 'gte') out.push({ value: r.greaterThan.value - 1, field: path, rule: 'int32.gte' });
    if (r.lessThan.case === 'lte') out.push({ value: r.lessThan.value + 1, field: path, rule: 'int32.lte' });
  }
  return out;
}

/** A valid object of `message` (its annotated fields only). */
function validObject(message: DescMessage): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of message.fields) {
    const rules = rulesOf(f);
    const value = rules && f.fieldKind === 'scalar' ? validValue(rules) : undefined;
    if (value !== undefined) out[f.name] = value;
  }
  // A spend limit's amount is a Value the validator does not see; the service needs one.
  if (message.typeName === 'switchboard.keys.v1.SpendLimit') out.amount_usd = '1';
  return out;
}

/** Every violation of the annotated field `f` (and of the annotated fields of its messages). */
function violationsOf(f: DescField): Violation[] {
  // A field taking several JSON types states them as a JSON Schema; none of them takes a boolean.
  if (hasOption(f, fieldOption) && getOption(f, fieldOption).schema !== '') return [{ value: true, field: f.name, rule: 'schema.type' }];
  const rules = rulesOf(f);
  if (f.fieldKind === 'scalar') return rules ? scalarViolations(rules, f.name) : [];
  if (f.fieldKind !== 'list') return [];
  const out: Violation[] = [];
  const list = rules?.type.case === 'repeated' ? rules.type.value : undefined;
  const element = (): unknown => (f.listKind === 'message' ? validObject(f.message) : list?.items ? validValue(list.items) : 'x');
  if (list?.maxItems)
    out.push({
      value: Array.from({ length: Number(list.maxItems) + 1 }, (_, i) => (f.listKind === 'scalar' && f.scalar === ScalarType.INT32 ? i + 1 : element())),
      field: f.name,
      rule: 'repeated.max_items',
    });
  if (list?.items) for (const v of scalarViolations(list.items, `${f.name}[0]`)) out.push({ ...v, value: [v.value] });
  if (f.listKind === 'message') {
    for (const nested of f.message.fields) {
      const nestedRules = rulesOf(nested);
      if (!nestedRules || nested.fieldKind !== 'scalar') continue;
      for (const v of scalarViolations(nestedRules, `${f.name}[0].${nested.name}`))
        out.push({ ...v, value: [{ ...validObject(f.message), [nested.name]: v.value }] });
    }
  }
  return out;
}

const annotated = (route: Route) => route.method.input.fields.filter((f) => violationsOf(f).length > 0);

/** The REST routes with input rules. */
const routes = buildRoutes().filter((route) => !route.unbuilt && annotated(route).length > 0);

let owner: SignedUp;
/** What the path variables name: objects the owner can see. */
const objects: Record<string, string> = {};

beforeAll(async () => {
  owner = await signUp(suite.call);
  const call = (method: string, path: string, body?: unknown) => suite.call(method, path, { token: owner.token, body });
  const org = await call('POST', '/v1/organizations', { name: 'Input rules' });
  expect(org.status, org.text).toBe(201);
  const key = await call('POST', '/v1/keys', { name: 'input rules' });
  expect(key.status, key.text).toBe(201);
  const conversation = await call('POST', '/v1/conversations', {});
  expect(conversation.status, conversation.text).toBe(201);
  const webhook = await call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks`, { url: 'https://receiver.example.com/hooks' });
  expect(webhook.status, webhook.text).toBe(201);
  const completion = await fetch(`${suite.mesh.gatewayUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.json.full_key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'service/fast', messages: [{ role: 'user', content: 'Hello' }] }),
  });
  expect(completion.status, await completion.text()).toBe(200);
  Object.assign(objects, {
    workspace_id: owner.workspaceId,
    org_id: org.json.organization.org_id,
    key_id: key.json.key.key_id,
    conversation_id: conversation.json.conversation_id,
    webhook_id: webhook.json.webhook_id,
    user_id: owner.userId,
    generation_id: completion.headers.get('x-service-generation-id') ?? '',
  });
});

/** Body fields a route needs beside its annotated ones, to reach its input rules. */
const extraBody: Record<string, () => Record<string, unknown>> = {
  'POST /v1/feedback': () => ({ generation_id: objects.generation_id }),
};

const label = (route: Route) => `${route.httpMethod} ${route.template}`;

describe('a value breaking an input rule', () => {
  it('covers the routes with rules', () => {
    // A floor, so that an annotation lost from the protos shows here.
    expect(routes.length).toBeGreaterThan(40);
  });

  it.each(routes.map((route) => [label(route), route] as const))('%s is a 400 naming the field', async (_, route) => {
    const path = route.template.replace(/\{(\w+)\}/g, (_m, name: string) => objects[name] ?? 'x_none');
    const fields = annotated(route);
    const baseline: Record<string, unknown> = { ...extraBody[label(route)]?.() };
    for (const f of fields) {
      const rules = rulesOf(f);
      const value = rules && f.fieldKind === 'scalar' ? validValue(rules) : undefined;
      if (value !== undefined) baseline[f.name] = value;
    }
    for (const f of fields) {
      for (const violation of violationsOf(f)) {
        const input = { ...baseline, [f.name]: violation.value };
        const token = route.credentials === 'none' ? undefined : owner.token;
        const send = () =>
          route.body === ''
            ? suite.call(route.httpMethod, `${path}?${new URLSearchParams(Object.entries(input).map(([k, v]): [string, string] => [k, String(v)]))}`, { token })
            : suite.call(route.httpMethod, path, { token, body: input });
        // The generation is recorded once its usage settles: until then a rating gets its 404 first.
        const response =
          route.template === '/v1/feedback'
            ? await eventually(async () => {
                const answer = await send();
                return answer.status === 404 ? undefined : answer;
              }, 'the generation to be recorded')
            : await send();
        const what = `${label(route)} ${violation.rule} ${JSON.stringify(violation.value).slice(0, 60)}: ${response.text}`;
        expect(response.status, what).toBe(400);
        expect(response.json.error, what).toMatchObject({ code: 'invalid_request', field: violation.field });
        expect(response.json.error.message, what).toContain(violation.field);
      }
    }
  });
});

// biome-ignore lint/suspicious/noExplicitAny: the document is JSON read as it comes.
type Schema = Record<string, any>;

// The document states the rules the generator reads from the same annotations
// (docs/conventions.md#input-rules): enum, minLength, maxLength, pattern, minimum, maximum, maxItems.
describe('the API reference', () => {
  let document: Schema;
  beforeAll(async () => {
    const response = await suite.call('GET', '/v1/openapi.json');
    expect(response.status).toBe(200);
    document = response.json;
  });

  const deref = (schema: Schema | undefined): Schema | undefined => {
    let current = schema;
    for (let i = 0; current?.$ref && i < 10; i++)
      current = current.$ref
        .split('/')
        .slice(1)
        .reduce((node: Schema, key: string) => node?.[key], document);
    return current;
  };
  /** The schema and every branch of it (anyOf, oneOf, allOf), dereferenced. */
  const branches = (schema: Schema | undefined): Schema[] => {
    const resolved = deref(schema);
    if (!resolved) return [];
    return [resolved, ...['anyOf', 'oneOf', 'allOf'].flatMap((k) => (resolved[k] ?? []).flatMap(branches))];
  };
  const propertyOf = (schema: Schema | undefined, name: string): Schema | undefined =>
    branches(schema)
      .map((s) => s.properties?.[name])
      .find(Boolean);
  const itemsOf = (schema: Schema | undefined): Schema | undefined =>
    branches(schema)
      .map((s) => s.items)
      .find(Boolean);
  /** The schema of a field of the route's input: a query or path parameter, or a property of the body. */
  const fieldSchema = (route: Route, name: string): Schema | undefined => {
    const operation = document.paths?.[route.template]?.[route.httpMethod.toLowerCase()];
    const parameter = (operation?.parameters ?? []).map(deref).find((p: Schema) => p?.name === name);
    if (parameter) return parameter.schema;
    return propertyOf(operation?.requestBody && deref(operation.requestBody)?.content?.['application/json']?.schema, name);
  };
  const has = (schema: Schema | undefined, keyword: string, value: unknown) =>
    branches(schema).some((s) => JSON.stringify(s[keyword]) === JSON.stringify(value));

  /** The JSON Schema keywords the rules of a string or int32 become (docs/conventions.md#input-rules). */
  const keywordsOf = (rules: FieldRules): Array<[string, unknown]> => {
    const type = rules.type;
    const out: Array<[string, unknown]> = [];
    if (type.case === 'string') {
      if (type.value.in.length > 0) out.push(['enum', type.value.in]);
      if (type.value.minLen > 0n) out.push(['minLength', Number(type.value.minLen)]);
      if (type.value.maxLen > 0n) out.push(['maxLength', Number(type.value.maxLen)]);
      if (type.value.pattern) out.push(['pattern', type.value.pattern]);
    } else if (type.case === 'int32') {
      if (type.value.in.length > 0) out.push(['enum', type.value.in]);
      if (type.value.greaterThan.case === 'gte') out.push(['minimum', type.value.greaterThan.value]);
      if (type.value.lessThan.case === 'lte') out.push(['maximum', type.value.lessThan.value]);
    } else if (type.case === 'repeated' && type.value.maxItems) {
      out.push(['maxItems', Number(type.value.maxItems)]);
    }
    return out;
  };

  it.each(routes.map((route) => [label(route), route] as const))('%s states the same rules', (_, route) => {
    for (const f of route.method.input.fields) {
      const schema = fieldSchema(route, f.name);
      const rules = rulesOf(f);
      const where = `${label(route)} ${f.name}: ${JSON.stringify(schema)?.slice(0, 300)}`;
      if (rules) for (const [keyword, value] of keywordsOf(rules)) expect(has(schema, keyword, value), `${where} ${keyword}`).toBe(true);
      if (rules?.type.case === 'repeated' && rules.type.value.items)
        for (const [keyword, value] of keywordsOf(rules.type.value.items)) expect(has(itemsOf(schema), keyword, value), `${where} items.${keyword}`).toBe(true);
      if (f.fieldKind === 'list' && f.listKind === 'message')
        for (const nested of f.message.fields) {
          const nestedRules = rulesOf(nested);
          if (nestedRules)
            for (const [keyword, value] of keywordsOf(nestedRules))
              expect(has(propertyOf(itemsOf(schema), nested.name), keyword, value), `${where}[].${nested.name} ${keyword}`).toBe(true);
        }
    }
  });

  it('uses the schema of every field that takes several JSON types', () => {
    const withSchema = buildRoutes().flatMap((route) =>
      route.method.input.fields
        .filter((f) => hasOption(f, fieldOption) && getOption(f, fieldOption).schema !== '')
        .map((f) => ({ route, f, stated: JSON.parse(getOption(f, fieldOption).schema) as Schema })),
    );
    expect(withSchema.length).toBeGreaterThan(10);
    for (const { route, f, stated } of withSchema) {
      const schema = fieldSchema(route, f.name);
      for (const [keyword, value] of Object.entries(stated)) expect(has(schema, keyword, value), `${label(route)} ${f.name} ${keyword}`).toBe(true);
    }
  });
});
