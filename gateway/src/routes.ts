import { type DescField, type DescMessage, type DescMethod, type DescMethodUnary, getOption, hasOption } from '@bufbuild/protobuf';
import type { ServiceName } from '@switchboard/contracts/components';
import { http } from '@switchboard/contracts/google/api/annotations_pb';
import type { HttpRule } from '@switchboard/contracts/google/api/http_pb';
import { field as fieldRule, rest } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { acceptedScopes, type Credentials, credentialsOf, type KeyScopeName, type RpcRule, requiredScope, ruleOf } from '@switchboard/runtime/policy';
import { meshServices } from './services.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** One path segment of a template: a literal, or a variable bound to a request field. */
export type Segment = { literal: string } | { field: DescField };

/** A REST route, derived from a method's google.api.http rule and switchboard.api.v1.rest. */
export interface Route {
  httpMethod: HttpMethod;
  /** The canonical template, e.g. /v1/keys/{key_id}. */
  template: string;
  segments: Segment[];
  /** "*" (the whole body), a field name, or "" (no body). */
  body: string;
  /** Field of the response sent as the body, or "" for the whole message. */
  responseBody: string;
  successStatus: number;
  /** Other success statuses the handler may pick (RestRule.other_successes), with when. */
  otherSuccesses: Array<{ status: number; when: string }>;
  /** The media type of a google.api.HttpBody answer (RestRule.response_content_type); "" for text/html. */
  responseContentType: string;
  /** Who may call it: the method's access option (docs/conventions.md#roles). */
  rule: RpcRule;
  /** The credentials the gateway accepts, from the rule. */
  credentials: Credentials;
  /** The scope an API key needs (docs/api/keys.md#scopes), from the rule or the HTTP method. */
  scope: KeyScopeName;
  /** The scopes any one of which admits a key: `scope` first, then the rule's `also_scopes`. */
  acceptedScopes: readonly KeyScopeName[];
  summary: string;
  /** Declared but not built yet (RestRule.unbuilt): it answers 501 and the document marks it. */
  unbuilt: boolean;
  owner: ServiceName;
  method: DescMethodUnary;
}

/** Groups that also answer without /v1 (docs/conventions.md#versions-and-paths); webhook paths exist only under /v1. */
const unversionedGroups = new Set(['auth', 'account', 'organizations', 'invitations', 'keys', 'billing', 'conversations', 'feedback']);

/** Builds every route of the REST surface from the protos' annotations. */
export function buildRoutes(): Route[] {
  const routes: Route[] = [];
  for (const { owner, service } of meshServices()) {
    for (const method of service.methods) {
      if (!hasOption(method, http)) continue;
      if (method.methodKind !== 'unary') throw new Error(`${method.toString()}: only unary RPCs can have REST routes`);
      const rule = getOption(method, http);
      const restRule = hasOption(method, rest) ? getOption(method, rest) : undefined;
      // Fails closed at start-up: a route without a valid rule, or an internal RPC with a route.
      const accessRule = ruleOf(method);
      if (accessRule.kind === 'internal') throw new Error(`${method.toString()}: an internal RPC has no REST route`);
      const { httpMethod, template } = patternOf(rule, method);
      const successStatus = restRule?.successStatus || 200;
      for (const other of restRule?.otherSuccesses ?? []) {
        if (other.status < 200 || other.status > 299 || other.status === 204 || other.status === successStatus)
          throw new Error(`${method.toString()}: other success status ${other.status} is not a 2xx with a body beside ${successStatus}`);
      }
      routes.push({
        httpMethod,
        template,
        segments: parseTemplate(template, method.input),
        body: rule.body,
        responseBody: rule.responseBody,
        successStatus,
        otherSuccesses: (restRule?.otherSuccesses ?? []).map(({ status, when }) => ({ status, when })),
        responseContentType: restRule?.responseContentType ?? '',
        rule: accessRule,
        credentials: credentialsOf(accessRule),
        scope: requiredScope(method),
        acceptedScopes: acceptedScopes(method),
        summary: restRule?.summary ?? '',
        unbuilt: restRule?.unbuilt ?? false,
        owner,
        method: method as DescMethodUnary,
      });
      for (const binding of rule.additionalBindings) {
        const extra = patternOf(binding, method);
        routes.push({ ...routes[routes.length - 1], ...extra, segments: parseTemplate(extra.template, method.input) });
      }
    }
  }
  return routes;
}

/** Whether a field of a body "*" request may also come from the query string (options.proto). */
export function readsFromQuery(field: DescField): boolean {
  return hasOption(field, fieldRule) && getOption(field, fieldRule).fromQuery;
}

/** The unversioned alias of a route's template, when its group has one. */
export function unversionedAlias(route: Route): Segment[] | undefined {
  const [version, group] = route.segments;
  if (!version || !('literal' in version) || version.literal !== 'v1') return undefined;
  if (!group || !('literal' in group) || !unversionedGroups.has(group.literal)) return undefined;
  return route.segments.slice(1);
}

function patternOf(rule: HttpRule, method: DescMethod): { httpMethod: HttpMethod; template: string } {
  switch (rule.pattern.case) {
    case 'get':
      return { httpMethod: 'GET', template: rule.pattern.value };
    case 'post':
      return { httpMethod: 'POST', template: rule.pattern.value };
    case 'put':
      return { httpMethod: 'PUT', template: rule.pattern.value };
    case 'patch':
      return { httpMethod: 'PATCH', template: rule.pattern.value };
    case 'delete':
      return { httpMethod: 'DELETE', template: rule.pattern.value };
    default:
      throw new Error(`${method.toString()}: unsupported google.api.http pattern ${rule.pattern.case}`);
  }
}

/** Parses "/v1/keys/{key_id}"; variables must name top-level scalar fields of the request. */
export function parseTemplate(template: string, input: DescMessage): Segment[] {
  if (!template.startsWith('/')) throw new Error(`template ${template} must start with /`);
  return template
    .slice(1)
    .split('/')
    .map((part) => {
      const variable = /^\{([a-z_][a-z0-9_]*)(=\*)?\}$/.exec(part);
      if (!variable) {
        if (/[{}*]/.test(part)) throw new Error(`template ${template}: unsupported segment ${part}`);
        return { literal: part };
      }
      const field = input.fields.find((f) => f.name === variable[1]);
      if (field?.fieldKind !== 'scalar') throw new Error(`template ${template}: ${variable[1]} is not a scalar field of ${input.typeName}`);
      return { field };
    });
}
