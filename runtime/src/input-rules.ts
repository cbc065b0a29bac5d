import { type DescField, type DescMessage, type DescMethod, getOption, hasOption, type Message } from '@bufbuild/protobuf';
import type { Path } from '@bufbuild/protobuf/reflect';
import { createValidator, type Violation } from '@bufbuild/protovalidate';
import { type ConnectError, type ConnectRouter, createContextKey, type HandlerContext } from '@connectrpc/connect';
import { type FieldRules, field as fieldRules } from '@switchboard/contracts/buf/validate/validate_pb';
import { http } from '@switchboard/contracts/google/api/annotations_pb';
import { invalidArgument } from './errors.js';
import { checkAfterDecision, type RpcRule, rpcName, ruleOf } from './policy.js';

/**
 * The input rules of the protos (`buf.validate` field annotations), checked by the services
 * (docs/conventions.md#input-rules). One validator for the process: it compiles each message's
 * rules once and keeps them.
 */
const validator = createValidator();

/** Where a method's input rules are checked. */
export type InputCheck =
  /** Its input has no rules. */
  | 'none'
  /** Before the handler runs, after the access rule (public, account, workspace and internal rules). */
  | 'before-handler'
  /** At the handler's first allowed authorization (a `handler` access rule): after the object's 404 and the role's 403. */
  | 'at-decision'
  /** By the handler itself, after the lookup of the object it acts on (inputCheckedInHandler). */
  | 'in-handler';

const checkedInHandler = Symbol('input rules checked in the handler');

/**
 * Declares that `impl` looks up the object it acts on before its input may be judged
 * (docs/conventions.md#order-of-checks: 404 before 400), so the rules are not checked before it
 * runs: it must call `inputProblem(ctx)` after the lookup and throw what it answers; a call
 * answered without it is a 500.
 */
export function inputCheckedInHandler<F extends (...args: never[]) => unknown>(impl: F): F {
  return Object.assign(impl, { [checkedInHandler]: true });
}

const isCheckedInHandler = (impl: unknown): boolean => typeof impl === 'function' && checkedInHandler in impl;

/** The pending check of an `in-handler` method's call, and whether the handler ran it. */
const pendingKey = createContextKey<{ problem: () => ConnectError | undefined; ran: boolean } | undefined>(undefined, {
  description: 'input rules to check',
});

/**
 * The 400 of the call's input rules, or undefined when it keeps them; for a handler declared
 * with `inputCheckedInHandler`, to call once the object it acts on is found.
 */
export function inputProblem(ctx: Pick<HandlerContext, 'values'>): ConnectError | undefined {
  const pending = ctx.values.get(pendingKey);
  if (!pending) return undefined;
  pending.ran = true;
  return pending.problem();
}

/** Whether any field of `message`, or of a message it holds, carries a `buf.validate` rule. */
export function hasInputRules(message: DescMessage, seen = new Set<DescMessage>()): boolean {
  if (seen.has(message)) return false;
  seen.add(message);
  return message.fields.some((field) => {
    if (hasOption(field, fieldRules)) return true;
    const nested = field.fieldKind === 'message' || (field.fieldKind === 'list' && field.listKind === 'message') ? field.message : undefined;
    return nested?.typeName.startsWith('switchboard.') === true && hasInputRules(nested, seen);
  });
}

/**
 * Path variables that name an object the handler looks up (not the workspace, which the gateway
 * resolves). A `{token}` of a public page is a capability, not an object a principal may or may
 * not see: its input may be judged first, as those handlers always did.
 */
const objectVariable = /\{(?!workspace_id\b)\w+_id\b/;

function pathOf(method: DescMethod): string {
  if (!hasOption(method, http)) return '';
  const pattern = getOption(method, http).pattern;
  return typeof pattern.value === 'string' ? pattern.value : '';
}

/**
 * Where `method`'s input rules are checked, or why it cannot be decided (a start-up error): a
 * method whose route names an object by id must check after its lookup, so it must say so.
 */
export function inputCheckOf(method: DescMethod, rule: RpcRule, declaredInHandler: boolean): InputCheck | { problem: string } {
  const rules = hasInputRules(method.input);
  if (declaredInHandler) return rules ? 'in-handler' : { problem: `${rpcName(method)} is declared inputCheckedInHandler but its input has no rules` };
  if (!rules) return 'none';
  if (method.methodKind !== 'unary') return { problem: `${rpcName(method)} is a stream with input rules: only unary methods are checked` };
  if (rule.kind === 'handler') return 'at-decision';
  if (objectVariable.test(pathOf(method)))
    return { problem: `${rpcName(method)} names an object in its path: declare its handler with inputCheckedInHandler and check the input after the lookup` };
  return 'before-handler';
}

type UnaryImpl = (req: Message, ctx: HandlerContext) => unknown;

/**
 * A router that checks the input rules of every unary method registered on it, where
 * `inputCheckOf` says; throws at registration (start-up) for a method it cannot place. The RPC
 * server and the in-process handler tests both register through it.
 */
export function checkingInput(router: ConnectRouter): ConnectRouter {
  const wrap = (method: DescMethod, impl: unknown, self?: object): unknown => {
    if (typeof impl !== 'function') return impl;
    const check = inputCheckOf(method, ruleOf(method), isCheckedInHandler(impl));
    if (typeof check === 'object') throw new Error(`input rules: ${check.problem}`);
    const bound = (impl as UnaryImpl).bind(self);
    const input = method.input;
    switch (check) {
      case 'none':
        return bound;
      case 'before-handler':
        return (req: Message, ctx: HandlerContext) => {
          const problem = violationOf(input, req);
          if (problem) throw problem;
          return bound(req, ctx);
        };
      case 'at-decision':
        return (req: Message, ctx: HandlerContext) => {
          const armed = checkAfterDecision(ctx.values, () => {
            const problem = violationOf(input, req);
            if (problem) throw problem;
          });
          if (!armed) throw new Error(`${rpcName(method)}: a handler rule without a decision to wait for`);
          return bound(req, ctx);
        };
      case 'in-handler':
        return async (req: Message, ctx: HandlerContext) => {
          const pending = { problem: () => violationOf(input, req), ran: false };
          ctx.values.set(pendingKey, pending);
          const answer = await bound(req, ctx);
          // Fail closed: a handler declared to check its input must have done so before answering.
          if (!pending.ran) throw new Error(`${rpcName(method)} answered without checking its input rules (inputProblem)`);
          return answer;
        };
    }
  };
  const checking = Object.create(router) as ConnectRouter;
  checking.service = ((service, implementation, options) => {
    const wrapped: Record<string, unknown> = {};
    for (const method of service.methods)
      wrapped[method.localName] = wrap(method, (implementation as Record<string, unknown>)[method.localName], implementation);
    return router.service(service, wrapped as typeof implementation, options);
  }) as ConnectRouter['service'];
  checking.rpc = ((method: DescMethod, impl: unknown, options?: unknown) =>
    (router.rpc as (...args: unknown[]) => ConnectRouter)(method, wrap(method, impl), options)) as ConnectRouter['rpc'];
  return checking;
}

/** The 400 of the first violation of `message`'s input rules, or undefined. */
export function violationOf(schema: DescMessage, message: Message): ConnectError | undefined {
  const result = validator.validate(schema, message as never);
  if (result.kind === 'valid') return undefined;
  // A rule that cannot compile is a bug of the contract, never the client's fault.
  if (result.kind === 'error') throw result.error;
  const violation = result.violations[0];
  const field = fieldPath(violation.field);
  return invalidArgument(field, messageOf(field, violation));
}

/** The input path of a violation as the error body names fields: snake_case, `scopes[1]`, `budgets[0].period`. */
export function fieldPath(path: Path): string {
  let text = '';
  for (const item of path) {
    if (item.kind === 'list_sub') text += `[${item.index}]`;
    else if (item.kind === 'map_sub') text += `[${JSON.stringify(String(item.key))}]`;
    else if (item.kind === 'field') text += text === '' ? item.name : `.${item.name}`;
  }
  return text;
}

/** The pattern of a plain decimal amount with at most I digits before the point and F after it (docs/conventions.md#money). */
const plainDecimalPattern = /^\^\\d\{1,(\d+)\}\(\\\.\\d\{1,(\d+)\}\)\?\$$/;

/** The rules of the violated value: the field's, or its items' for an element of a list. */
function rulesOf(path: Path): FieldRules | undefined {
  const last = path[path.length - 1];
  const field = [...path].reverse().find((item): item is DescField => item.kind === 'field');
  if (!field || !hasOption(field, fieldRules)) return undefined;
  const rules = getOption(field, fieldRules);
  if (last?.kind === 'list_sub' && rules.type.case === 'repeated') return rules.type.value.items;
  return rules;
}

/** A sentence naming the field and the rule it breaks, in the style of the services' own messages. */
function messageOf(field: string, violation: Violation): string {
  const rules = rulesOf(violation.field)?.type;
  const quoted = (values: readonly (string | number)[]) => values.map((value) => String(value)).join(', ');
  switch (violation.ruleId) {
    case 'string.in':
      if (rules?.case === 'string') return `${field} must be one of ${quoted(rules.value.in)}.`;
      break;
    case 'int32.in':
      if (rules?.case === 'int32') return `${field} must be one of ${quoted(rules.value.in)}.`;
      break;
    case 'string.min_len':
      if (rules?.case === 'string' && rules.value.minLen === 1n) return `${field} is required.`;
      if (rules?.case === 'string') return `${field} must be at least ${rules.value.minLen} characters.`;
      break;
    case 'string.max_len':
      if (rules?.case === 'string') return `${field} may be at most ${rules.value.maxLen} characters.`;
      break;
    case 'string.pattern': {
      const digits = rules?.case === 'string' ? plainDecimalPattern.exec(rules.value.pattern) : null;
      if (digits)
        return `${field} must be a decimal string such as "12.50" (digits, optionally a point and more digits; no sign, exponent or spaces), with at most ${digits[1]} digits before the point and ${digits[2]} after it.`;
      break;
    }
    case 'int32.gte_lte':
      if (rules?.case === 'int32' && rules.value.greaterThan.case === 'gte' && rules.value.lessThan.case === 'lte')
        return `${field} must be an integer from ${rules.value.greaterThan.value} to ${rules.value.lessThan.value}.`;
      break;
    case 'repeated.max_items':
      if (rules?.case === 'repeated') return `${field} may hold at most ${rules.value.maxItems} items.`;
      break;
  }
  return `${field}: ${violation.message}.`;
}
