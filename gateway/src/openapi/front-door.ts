import { errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { regions, serviceTiers } from '@switchboard/runtime/model-catalog';
import { tiers } from '@switchboard/runtime/pricing';
import { type ErrorCase, type ErrorResponses, FRONT_DOOR_ERROR_SCHEMA, fromCatalogue, frontDoorErrorSchema } from './errors.js';
import type { Json } from './json-schema.js';

/**
 * The OpenAI-compatible front door (docs/api/front-door.md): `POST /v1/chat/completions` and
 * `GET /v1/models`, which the gateway forwards to the data plane. They are not protos, so their
 * schemas are written here from what data-plane/src reads and answers: the allow-list of
 * parameters (chat-request.ts), the `service` object (completions.ts), the model list
 * (model-list.ts), and OpenAI-shaped errors (openai-error.ts) with the codes of the catalogue.
 */

export const FRONT_DOOR_TAG = 'Front door';

const schemaRef = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const headerRef = (name: string): Json => ({ $ref: `#/components/headers/${name}` });
const decimal = (description: string): Json => ({ type: 'string', pattern: '^\\d+(\\.\\d+)?$', description });

/** The front door's own response headers (docs/api/front-door.md#rate-limits, #responses). */
export const frontDoorHeaders: Record<string, Json> = {
  'X-Service-Generation-Id': {
    description: 'The generation id (`gen_…`) of a completion: the id `POST /v1/feedback` takes, also in `service.generation_id`.',
    schema: { type: 'string' },
  },
  'X-Service-Overhead-Ms': {
    description: 'Milliseconds the request spent in the platform, the upstream excluded, with three decimals (`0.412`).',
    schema: { type: 'string', pattern: '^\\d+\\.\\d{3}$' },
  },
  ...Object.fromEntries(
    (['requests', 'tokens'] as const).flatMap((what) => [
      [
        `x-ratelimit-limit-${what}`,
        { description: `The key's ${what} per minute (only for a key with that limit).`, schema: { type: 'string', pattern: '^\\d+$' } },
      ],
      [
        `x-ratelimit-remaining-${what}`,
        { description: `What is left of the key's ${what} per minute, as this data plane knows it.`, schema: { type: 'string', pattern: '^\\d+$' } },
      ],
      [
        `x-ratelimit-reset-${what}`,
        { description: 'Seconds to the end of the UTC minute, as OpenAI writes them (`"12s"`).', schema: { type: 'string', pattern: '^\\d+s$' } },
      ],
    ]),
  ),
};

function responseHeaders(status: number, completion: boolean): Json {
  return {
    'X-Request-Id': headerRef('X-Request-Id'),
    'X-Service-Overhead-Ms': headerRef('X-Service-Overhead-Ms'),
    ...(completion && status < 300 ? { 'X-Service-Generation-Id': headerRef('X-Service-Generation-Id') } : {}),
    ...Object.fromEntries(
      Object.keys(frontDoorHeaders)
        .filter((name) => name.startsWith('x-ratelimit-'))
        .map((name) => [name, headerRef(name)]),
    ),
    ...(status === 429 || status === 503 ? { 'Retry-After': headerRef('Retry-After') } : {}),
  };
}

const serviceTierIds = serviceTiers.map((tier) => `service/${tier}`);

export const frontDoorSchemas: Record<string, Json> = {
  [FRONT_DOOR_ERROR_SCHEMA]: frontDoorErrorSchema(),
  ChatCompletionRequest: {
    type: 'object',
    title: 'ChatCompletionRequest',
    description:
      "OpenAI's chat completion request, limited to the parameters whose output the platform can bill: any other top-level field, even `null`, is a 400 `unsupported_parameter` naming it (docs/api/front-door.md#parameters). The platform checks `model`, `messages`, `stream`, `max_tokens`, `max_completion_tokens` and `n`; the others go upstream as sent.",
    required: ['model', 'messages'],
    additionalProperties: false,
    properties: {
      model: {
        type: 'string',
        minLength: 1,
        description: `A service tier (${serviceTierIds.map((id) => `\`${id}\``).join(', ')}: the key's routing policy and the routing scores pick the model and region) or a model id of the catalog (passthrough); \`GET /v1/models\` lists them.`,
        examples: [...serviceTierIds, 'gpt-4o-mini'],
      },
      messages: {
        type: 'array',
        minItems: 1,
        maxItems: 10000,
        description: "The conversation so far, as OpenAI's messages.",
        items: {
          type: 'object',
          required: ['role'],
          additionalProperties: true,
          description: 'One message: a role and its content (a string, or an array of content parts).',
          properties: {
            role: { type: 'string', description: '`system`, `user`, `assistant`, `tool`, … as the upstream takes them.' },
            content: { type: ['string', 'array', 'null'], description: 'Text, or content parts (`{"type": "text", "text"}`, `{"type": "image_url", …}`).' },
          },
        },
      },
      max_tokens: {
        type: 'integer',
        minimum: 1,
        description: 'The most tokens the answer may have; without it `DEFAULT_MAX_TOKENS` is sent upstream and estimated.',
      },
      max_completion_tokens: {
        type: 'integer',
        minimum: 1,
        description: 'The same bound under its newer name; with both, the larger counts for the estimate.',
      },
      n: { type: 'integer', minimum: 1, maximum: 16, default: 1, description: 'How many choices to generate; each is generated and billed.' },
      stream: { type: ['boolean', 'null'], default: false, description: 'Stream the answer as server-sent events (`text/event-stream`).' },
      stream_options: { type: 'object', description: "OpenAI's stream options; `include_usage` is forced on upstream." },
      temperature: { type: 'number', description: 'Passed upstream.' },
      top_p: { type: 'number', description: 'Passed upstream.' },
      stop: { type: ['string', 'array', 'null'], items: { type: 'string' }, description: 'Passed upstream.' },
      presence_penalty: { type: 'number', description: 'Passed upstream.' },
      frequency_penalty: { type: 'number', description: 'Passed upstream.' },
      logit_bias: { type: 'object', additionalProperties: { type: 'number' }, description: 'Passed upstream.' },
      logprobs: { type: 'boolean', description: 'Passed upstream.' },
      top_logprobs: { type: 'integer', description: 'Passed upstream.' },
      seed: { type: 'integer', description: 'Passed upstream.' },
      user: { type: 'string', description: 'Passed upstream.' },
      response_format: { type: 'object', description: 'Passed upstream.' },
      tools: { type: 'array', items: { type: 'object' }, description: 'Passed upstream.' },
      tool_choice: { type: ['string', 'object'], description: 'Passed upstream.' },
      parallel_tool_calls: { type: 'boolean', description: 'Passed upstream.' },
    },
    examples: [{ model: 'service/fast', messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 64 }],
  },
  ChatCompletionService: {
    type: 'object',
    title: 'ChatCompletionService',
    description: 'What the platform did with the request: the generation, where it was routed and what it cost (what billing debits, exactly).',
    required: ['generation_id', 'tier', 'routed_model', 'region', 'cost_usd'],
    properties: {
      generation_id: { type: 'string', description: 'The generation id (`gen_…`) `POST /v1/feedback` takes.' },
      // The front door prices as tierOf(model, false) (data-plane/src/completions.ts): never `byok`.
      tier: {
        type: 'string',
        enum: tiers.filter((tier) => tier !== 'byok'),
        description: 'How it is billed: a service tier, or `passthrough` for a concrete model.',
      },
      routed_model: { type: 'string', description: 'The model of the catalog that answered.' },
      region: { type: 'string', enum: [...regions], description: 'The region of the upstream that answered.' },
      cost_usd: decimal('What the request cost, in USD (a decimal string).'),
    },
  },
  ChatCompletion: {
    type: 'object',
    title: 'ChatCompletion',
    description: "The upstream's OpenAI chat completion as it answered, with `service` added.",
    required: ['id', 'object', 'choices', 'service'],
    additionalProperties: true,
    properties: {
      id: { type: 'string', description: "The upstream's completion id." },
      object: { type: 'string', const: 'chat.completion', description: 'Always `chat.completion`.' },
      created: { type: 'integer', description: 'Unix seconds.' },
      model: { type: 'string', description: 'The model as the upstream names it.' },
      choices: { type: 'array', items: { type: 'object', additionalProperties: true }, description: "OpenAI's choices: `index`, `message`, `finish_reason`." },
      usage: {
        type: 'object',
        additionalProperties: true,
        description: 'Token counts as the upstream reported them (what is billed when present).',
        properties: {
          prompt_tokens: { type: 'integer', description: 'Tokens of the prompt.' },
          completion_tokens: { type: 'integer', description: 'Tokens of the answer.' },
          total_tokens: { type: 'integer', description: 'Their sum.' },
        },
      },
      service: { ...schemaRef('ChatCompletionService'), description: 'What the platform did: the generation id, the routing and the cost.' },
    },
    examples: [
      {
        id: 'chatcmpl-9x2',
        object: 'chat.completion',
        created: 1764150000,
        model: 'gpt-4o-mini',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Hello!' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 },
        service: { generation_id: 'gen_7Qk2mN8pR4sT6vX1', tier: 'fast', routed_model: 'gpt-4o-mini', region: 'overseas', cost_usd: '0.0000045' },
      },
    ],
  },
  Model: {
    type: 'object',
    title: 'Model',
    description: 'A model the key may use: a service tier, or a model of the catalog (docs/api/front-door.md#the-model-list).',
    required: ['id', 'object', 'created', 'owned_by', 'tiers', 'pricing', 'demo'],
    properties: {
      id: { type: 'string', description: 'The `model` to send: a service tier or a catalog model id.' },
      object: { type: 'string', const: 'model', description: 'Always `model`.' },
      created: { type: 'integer', description: 'A fixed date (the catalog does not say when a model was made), Unix seconds.' },
      owned_by: {
        type: 'string',
        enum: ['switchboard', 'upstream', 'switchboard-demo'],
        description: '`switchboard` for a service tier, `upstream` for a catalog model, `switchboard-demo` when the demo upstream answers it.',
      },
      region: { type: 'string', enum: [...regions], description: "A catalog model's region; absent for a tier and for a model served in several regions." },
      tiers: { type: 'array', items: { type: 'string', enum: [...serviceTiers] }, description: 'The service tiers the entry is, or is a candidate of.' },
      pricing: {
        type: 'object',
        required: ['input_usd_per_1m', 'output_usd_per_1m'],
        description: "What the workspace's plan pays per million tokens.",
        properties: {
          input_usd_per_1m: decimal('USD per million prompt tokens.'),
          output_usd_per_1m: decimal('USD per million answer tokens.'),
        },
      },
      demo: { type: 'boolean', description: 'An answer may come from the demo upstream (a region without its API key).' },
    },
  },
  ModelList: {
    type: 'object',
    title: 'ModelList',
    description: "OpenAI's model list: the service tiers first, then each catalog model once, only what the key may use.",
    required: ['object', 'data'],
    properties: {
      object: { type: 'string', const: 'list', description: 'Always `list`.' },
      data: { type: 'array', items: schemaRef('Model'), description: 'The models.' },
    },
    examples: [
      {
        object: 'list',
        data: [
          {
            id: 'service/fast',
            object: 'model',
            created: 1700000000,
            owned_by: 'switchboard',
            tiers: ['fast'],
            pricing: { input_usd_per_1m: '0.20', output_usd_per_1m: '0.80' },
            demo: false,
          },
          {
            id: 'gpt-4o-mini',
            object: 'model',
            created: 1700000000,
            owned_by: 'upstream',
            region: 'overseas',
            tiers: ['fast'],
            pricing: { input_usd_per_1m: '0.1575', output_usd_per_1m: '0.63' },
            demo: false,
          },
        ],
      },
    ],
  },
};

/** The refusals both routes share: the key (401), its scope (403), a dependency (503), a bug. */
const keyErrors = (): ErrorCase[] => [
  ...fromCatalogue(errorCatalogue.unauthenticated, errorCatalogue.invalidApiKey, errorCatalogue.apiKeyRevoked, errorCatalogue.apiKeyExpired),
  { ...fromCatalogue(errorCatalogue.insufficientScope)[0], metadata: { required_scope: 'inference' } },
];

const tail = (): ErrorCase[] => fromCatalogue(errorCatalogue.serviceUnavailable, errorCatalogue.internalError);

/** docs/api/front-door.md#order-of-checks, #errors. */
function completionErrors(): ErrorCase[] {
  return [
    {
      ...fromCatalogue(errorCatalogue.invalidRequest)[0],
      when: 'A parameter the platform checks is missing or of the wrong type (`field` and `param` name it).',
      field: 'messages',
    },
    ...fromCatalogue(errorCatalogue.invalidJson),
    { ...fromCatalogue(errorCatalogue.unsupportedParameter)[0], field: 'audio' },
    { ...fromCatalogue(errorCatalogue.modelUnavailable)[0], field: 'model' },
    ...fromCatalogue(errorCatalogue.upstreamRejected),
    ...keyErrors(),
    { ...fromCatalogue(errorCatalogue.spendCapExceeded)[0] },
    { ...fromCatalogue(errorCatalogue.insufficientBalance)[0], metadata: { balance_usd: '0.40', required_usd: '0.52' } },
    { ...fromCatalogue(errorCatalogue.modelNotAllowed)[0], field: 'model' },
    { ...fromCatalogue(errorCatalogue.routingPolicyViolation)[0], field: 'model' },
    { status: 404, code: 'conversation_not_found', when: "`X-Service-Conversation-Id` names no conversation of the key's workspace." },
    ...fromCatalogue(errorCatalogue.payloadTooLarge, errorCatalogue.unsupportedMediaType, errorCatalogue.rateLimitExceeded),
    ...fromCatalogue(errorCatalogue.upstreamError),
    ...tail(),
  ];
}

/** The codes of a stream's last `error` event (data-plane/src/completions.ts), which no status carries. */
const streamErrorCodes = `\`${errorCatalogue.streamTooLong.code}\`, \`${errorCatalogue.upstreamError.code}\`, or \`${errorCatalogue.serviceUnavailable.code}\` when the data plane shuts down`;

const apiKeyOnly = [{ apiKey: [] }];

/** The description's closing lines, as the REST operations have them (openapi/security.ts). */
const access = (what: string) =>
  `${what}\n\nCredentials: An API key (a user's access token is refused with 401). API keys need the \`inference\` scope (model requests and what they need).\n\nAccess: any API key with the \`inference\` scope, within its allowed models, routing policy, rate limits and budgets.`;

/** The `paths` of the front door. */
export function frontDoorPaths(errors: ErrorResponses): Record<string, Json> {
  const common = {
    tags: [FRONT_DOOR_TAG],
    security: apiKeyOnly,
    // The REST operations' extensions, in the front door's terms: API keys only, checked by the data plane.
    'x-switchboard-access': { rule: 'front_door', credentials: 'api_key' },
    'x-required-scope': 'inference',
    'x-switchboard-component': 'data-plane',
  };
  return {
    '/v1/chat/completions': {
      post: {
        ...common,
        operationId: 'FrontDoor_CreateChatCompletion',
        summary: 'Create a chat completion (OpenAI-compatible)',
        description: access(
          `OpenAI's chat completion at the platform's prices and limits: the official \`openai\` client works unchanged with \`baseURL\` set to this gateway's \`/v1\`. The key's allowed models, rate limits, budgets and the workspace's balance are checked before anything goes upstream; the answer is billed before its last byte. Not streamed, the body is the upstream's completion with \`service\` added; streamed, the upstream's events pass through as they come, the last chunk carries \`service\`, then \`data: [DONE]\`. A stream that ends early sends an \`error\` event (${streamErrorCodes}). The REST surface's \`Idempotency-Key\` and \`RateLimit\` headers do not apply here: the key's own \`rate_limits\` do (the \`x-ratelimit-*\` headers).`,
        ),
        parameters: [
          {
            name: 'X-Service-Conversation-Id',
            in: 'header',
            required: false,
            description:
              "Appends the request's last user message and the answer to this conversation of the key's workspace (404 `conversation_not_found` when it cannot see it).",
            schema: { type: 'string' },
          },
        ],
        requestBody: {
          required: true,
          content: {
            'application/json': { schema: schemaRef('ChatCompletionRequest'), example: (frontDoorSchemas.ChatCompletionRequest.examples as Json[])[0] },
          },
        },
        responses: {
          '200': {
            description: 'The completion: a JSON body, or with `"stream": true` server-sent events.',
            headers: responseHeaders(200, true),
            content: {
              'application/json': { schema: schemaRef('ChatCompletion'), example: (frontDoorSchemas.ChatCompletion.examples as Json[])[0] },
              'text/event-stream': {
                schema: {
                  type: 'string',
                  description:
                    'Server-sent events: each `data:` line a `chat.completion.chunk` as the upstream sent it; the last chunk has empty `choices` and the `service` object (ChatCompletionService); then `data: [DONE]`. An error after the first byte is a last event `{"error": {code, message, type, param}}`.',
                },
                example:
                  'data: {"id":"chatcmpl-9x2","object":"chat.completion.chunk","created":1764150000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello!"}}]}\n\ndata: {"id":"chatcmpl-9x2","object":"chat.completion.chunk","created":1764150000,"model":"gpt-4o-mini","choices":[],"service":{"generation_id":"gen_7Qk2mN8pR4sT6vX1","tier":"fast","routed_model":"gpt-4o-mini","region":"overseas","cost_usd":"0.0000045"}}\n\ndata: [DONE]\n\n',
              },
            },
          },
          ...errors.of(completionErrors(), 'front-door', (status) => responseHeaders(status, true)),
        },
      },
    },
    '/v1/models': {
      get: {
        ...common,
        operationId: 'FrontDoor_ListModels',
        summary: 'List the models the key may use (OpenAI-compatible)',
        description: access(
          "OpenAI's model list: the service tiers, then every model of the catalog once, each with what the workspace's plan pays per million tokens; a key with `allowed_models` sees only what it may use.",
        ),
        responses: {
          '200': {
            description: 'The models.',
            headers: responseHeaders(200, false),
            content: { 'application/json': { schema: schemaRef('ModelList'), example: (frontDoorSchemas.ModelList.examples as Json[])[0] } },
          },
          ...errors.of([...keyErrors(), ...tail()], 'front-door', (status) => responseHeaders(status, false)),
        },
      },
    },
  };
}

/** The front door's tag. */
export const frontDoorTag: Json = {
  name: FRONT_DOOR_TAG,
  description:
    'The OpenAI-compatible routes (docs/api/front-door.md), served by the data plane behind this gateway: chat completions and the model list, with API keys of the `inference` scope.',
  'x-switchboard-component': 'data-plane',
};
