import { STATUS_CODES } from 'node:http';
import type { DescField, DescService } from '@bufbuild/protobuf';
import { comments } from '@switchboard/contracts/comments';
import { type Route, readsFromQuery } from '../routes.js';
import { type ErrorResponses, errorsOf } from './errors.js';
import { IDEMPOTENCY_KEY_PARAMETER, restHeaders } from './headers.js';
import { enumSchema, HTTP_BODY, type Json, scalarSchema } from './json-schema.js';
import { constrained, constraintsOf } from './rules.js';
import { exampleOf, isRequired, type Schemas } from './schemas.js';
import { accessExtension, accessLine, credentialsLabel, scopeLine, securityOf } from './security.js';

/** An operation per route: parameters, request body, responses, description and extensions. */

/** Hints for well-known request fields (docs/conventions.md, docs/api/billing.md, docs/api/conversations.md). */
const queryHints: Record<string, Json> = {
  limit: { minimum: 1, maximum: 100, default: 20, description: 'Page size, 1..100 (outside that range is a 400).' },
  after: { description: 'Cursor: the `next_cursor` of the previous page.' },
  days: { minimum: 1, maximum: 365, default: 30, description: 'Window in days, 1..365.' },
};

/** stripe_signature → Stripe-Signature. */
function headerName(fieldName: string): string {
  return fieldName
    .split('_')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('-');
}

/** A path, query or header parameter's schema with its field's limits, or undefined when the field cannot travel there. */
function parameterSchema(field: DescField): Json | undefined {
  const schema = parameterType(field);
  return schema && constrained(schema, constraintsOf(field));
}

function parameterType(field: DescField): Json | undefined {
  switch (field.fieldKind) {
    case 'scalar':
      return { ...scalarSchema(field.scalar), ...(queryHints[field.name] ?? {}) };
    case 'enum':
      return enumSchema(field.enum);
    case 'list':
      if (field.listKind === 'scalar') return { type: 'array', items: scalarSchema(field.scalar) };
      if (field.listKind === 'enum') return { type: 'array', items: enumSchema(field.enum) };
      return undefined;
    default:
      // Messages (well-known types included) cannot be given in a query string.
      return undefined;
  }
}

export function responseOf(route: Route, schemas: Schemas): { contentType: string; schema: Json; example?: Json } | undefined {
  if (route.successStatus === 204) return undefined;
  const output = route.method.output;
  if (route.responseBody) {
    const field = output.fields.find((f) => f.name === route.responseBody);
    if (!field) throw new Error(`${route.method.toString()}: response_body ${route.responseBody} is not a field of ${output.typeName}`);
    if (field.fieldKind === 'message' && field.message.typeName === HTTP_BODY) return { contentType: 'text/html', schema: { type: 'string' } };
    return {
      contentType: 'application/json',
      schema: schemas.field(field, 'output'),
      example: field.fieldKind === 'message' ? exampleOf(field.message) : undefined,
    };
  }
  if (output.typeName === HTTP_BODY) {
    // A page unless the route names another media type (a JSON document such as a data export).
    // Its shape is the document's (docs/api/…), not a message of the protos: any JSON, like a raw request body.
    if (route.responseContentType === 'application/json') return { contentType: 'application/json', schema: {} };
    return { contentType: route.responseContentType || 'text/html', schema: { type: 'string' } };
  }
  return { contentType: 'application/json', schema: schemas.message(output, 'output'), example: exampleOf(output) };
}

/** The media type of a response's raw-body field, by its name (`csv` → text/csv); octet-stream for a name not listed. */
const rawBodyMedia: Record<string, string> = { csv: 'text/csv', html: 'text/html' };

/**
 * The other answers of a JSON response: each google.api.HttpBody field of the response message,
 * which the gateway sends raw instead of the JSON when the handler set it (rest.ts sendResult).
 */
export function rawBodiesOf(route: Route): Array<{ field: string; contentType: string }> {
  if (route.successStatus === 204 || route.responseBody || route.method.output.typeName === HTTP_BODY) return [];
  return route.method.output.fields
    .filter((f) => f.fieldKind === 'message' && f.message.typeName === HTTP_BODY)
    .map((f) => ({ field: f.name, contentType: rawBodyMedia[f.name] ?? 'application/octet-stream' }));
}

export function operationOf(route: Route, tag: string, schemas: Schemas, errorResponses: ErrorResponses): Json {
  const input = route.method.input;
  const pathFields = route.segments.flatMap((s) => ('field' in s ? [s.field] : []));
  const pathNames = new Set(pathFields.map((f) => f.name));
  const parameters: Json[] = pathFields.map((f) => {
    const { description, ...schema } = parameterSchema(f) ?? { type: 'string' };
    return { name: f.name, in: 'path', required: true, ...describedParameter(f, description), schema };
  });

  let requestBody: Json | undefined;
  const nonPath = input.fields.filter((f) => !pathNames.has(f.name));
  let queryFields = nonPath;
  if (route.body === '*') {
    const example = exampleOf(input, pathNames);
    requestBody = {
      // Required when a field is: a body of optional fields may be left out (POST /v1/auth/logout).
      required: nonPath.some(isRequired),
      content: { 'application/json': { schema: schemas.input(input, [...pathNames]), ...(example ? { example } : {}) } },
    };
    queryFields = nonPath.filter(readsFromQuery);
  } else {
    if (route.body) {
      const bodyField = input.fields.find((f) => f.name === route.body);
      if (!bodyField) throw new Error(`${route.method.toString()}: body ${route.body} is not a field of ${input.typeName}`);
      queryFields = nonPath.filter((f) => f !== bodyField);
      if (bodyField.fieldKind === 'message' && bodyField.message.typeName === HTTP_BODY) {
        // A raw body (e.g. a provider's signed webhook): passed on byte for byte; the other
        // fields come from the request headers of the same name.
        requestBody = {
          required: true,
          description: 'The raw request body, passed on byte for byte.',
          content: { 'application/json': { schema: {} } },
        };
        for (const f of queryFields) {
          const { description, ...schema } = parameterSchema(f) ?? { type: 'string' };
          parameters.push({ name: headerName(f.name), in: 'header', required: true, ...describedParameter(f, description), schema });
        }
        queryFields = [];
      } else {
        const example = bodyField.fieldKind === 'message' ? exampleOf(bodyField.message) : undefined;
        requestBody = { required: true, content: { 'application/json': { schema: schemas.field(bodyField, 'input'), ...(example ? { example } : {}) } } };
      }
    }
  }
  for (const f of queryFields) {
    const schema = parameterSchema(f);
    if (!schema) continue; // not representable in a query string
    const { description, ...paramSchema } = schema;
    parameters.push({
      name: f.name,
      in: 'query',
      required: isRequired(f),
      ...describedParameter(f, description),
      ...(schema.type === 'array' ? { style: 'form', explode: true } : {}),
      schema: paramSchema,
    });
  }
  if (route.credentials !== 'none' && !pathNames.has('workspace_id')) parameters.push({ $ref: '#/components/parameters/WorkspaceId' });
  const post = route.httpMethod === 'POST';
  if (post) parameters.push({ $ref: `#/components/parameters/${IDEMPOTENCY_KEY_PARAMETER}` });

  const status = String(route.successStatus);
  const success: Json = {
    description: STATUS_CODES[route.successStatus] ?? 'Success',
    headers: restHeaders(route.successStatus, post),
  };
  const response = responseOf(route, schemas);
  if (response) success.content = { [response.contentType]: { schema: response.schema, ...(response.example ? { example: response.example } : {}) } };
  for (const raw of rawBodiesOf(route)) {
    const content = (success.content ?? {}) as Record<string, Json>;
    content[raw.contentType] = {
      schema: { type: 'string', description: `The answer as ${raw.contentType}, when the request asks for it (the \`${raw.field}\` of the response).` },
    };
    success.content = content;
  }

  const successes: Record<string, Json> = { [status]: success };
  for (const other of route.otherSuccesses) successes[other.status] = { ...success, description: `${STATUS_CODES[other.status] ?? 'Success'}: ${other.when}` };
  const responses: Record<string, Json> = { ...successes, ...errorResponses.of(errorsOf(route), 'rest', (status) => restHeaders(status, post)) };

  const rpc = `${route.method.parent.typeName}/${route.method.name}`;
  const own = comments[`${route.method.parent.typeName}.${route.method.name}`] ?? '';
  const unbuilt = route.unbuilt ? '**Not built yet:** this operation answers 501 `not_implemented` until it is.\n\n' : '';
  const scope = scopeLine(route);
  const operation: Json = {
    tags: [tag],
    summary: `${route.unbuilt ? '(Not built yet) ' : ''}${route.summary || route.method.name}`,
    description: `${unbuilt}${own}\n\nCredentials: ${credentialsLabel(route.credentials)}${scope ? ` ${scope}` : ''}\n\n${accessLine(route.rule)}`,
    operationId: `${route.method.parent.name}_${route.method.name}`,
    security: securityOf(route.credentials),
    'x-switchboard-access': accessExtension(route),
    // docs/api/keys.md#scopes: only where an API key is accepted.
    ...(scope ? { 'x-required-scope': route.scope } : {}),
    'x-switchboard-rpc': rpc,
    ...(route.unbuilt ? { 'x-switchboard-unbuilt': true } : {}),
  };
  if (parameters.length > 0) operation.parameters = parameters;
  if (requestBody) operation.requestBody = requestBody;
  operation.responses = responses;
  return operation;
}

/** A parameter's description: its field's comment, else the hint of its name (limit, after…). */
function describedParameter(field: DescField, hint: unknown): { description?: string } {
  const text = comments[`${field.parent.typeName}.${field.name}`] || (typeof hint === 'string' ? hint : '');
  return text ? { description: text } : {};
}

/** A tag per service: the resource in the service's own words; the proto name for mesh callers. */
export function tagOf(name: string, service: DescService, owner: string): Json {
  return {
    name,
    description: comments[service.typeName] ?? name,
    'x-switchboard-service': service.typeName,
    'x-switchboard-component': owner,
  };
}
