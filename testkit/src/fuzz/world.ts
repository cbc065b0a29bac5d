import { randomBytes } from 'node:crypto';
import { createKey, registerUserWithPassword } from '../gateway-accounts.js';

/**
 * The world the REST fuzzer (issue 11) acts in: two users, `a` and `b`, each with real data in
 * their own workspaces (a team organization with an invitation, API keys, a webhook endpoint with
 * a delivery, a conversation with a message, a checkout). Generated requests name these values by
 * placeholders such as `{{b.poolKeyId}}`, resolved only when a request is sent: a counterexample stays
 * readable, and a user the fuzzer signed out for good (a global logout while its sign-in is locked
 * by wrong passwords) is replaced by a new one that later runs pick up.
 */

export type Party = 'a' | 'b';
export const parties: readonly Party[] = ['a', 'b'];

/** The values of a party that requests may name, each also a secret the other party must never see. */
export interface PartyFacts {
  /** Credentials. */
  session: string;
  refreshToken: string;
  /** A key the fuzzer authenticates with; its id is never offered, so no run revokes it. */
  apiKey: string;
  /** A key the fuzzer may change, cap or revoke by id, and also authenticates with. */
  poolKey: string;
  poolKeyId: string;
  revokedKey: string;
  revokedKeyId: string;
  /** Identity. */
  userId: string;
  email: string;
  fullName: string;
  personalWorkspace: string;
  teamOrg: string;
  invitationId: string;
  invitedEmail: string;
  /** Objects of the personal workspace. */
  webhookId: string;
  webhookSecret: string;
  deliveryId: string;
  conversationId: string;
  conversationTitle: string;
  messageId: string;
  checkoutId: string;
  checkoutToken: string;
}

export type Fact = keyof PartyFacts;

/** Tokens that look right and are not: derived from a's current session when a request is sent. */
export const forgedTokens = ['forgedJwt', 'expiredJwt', 'unsignedJwt'] as const;
export const forgedRef = (name: (typeof forgedTokens)[number]) => `{{${name}}}`;

/** The mesh settings a fuzz run needs: client addresses from X-Forwarded-For, no per-user action limits, the sandbox's payments. */
export const fuzzMeshEnv: Record<string, string> = {
  GATEWAY_TRUSTED_PROXIES: '127.0.0.1,::1',
  BILLING_SANDBOX: 'true',
  ORGANIZATIONS_PER_USER_PER_HOUR: '100000',
  INVITATIONS_PER_USER_PER_HOUR: '100000',
};

/** Where webhooks of the world point: loopback, which the mesh refuses to deliver to, so nothing leaves the machine. */
const receiverUrl = 'https://127.0.0.1:9/fuzz';

interface PartyState {
  facts: PartyFacts;
  password: string;
  /** Ids and secrets that are not offered to requests but must not leak either. */
  hidden: string[];
}

const unique = () => randomBytes(6).toString('hex');

/** A JSON call made to build or mend the world; anything but `expected` stops the run. */
async function setupCall(gatewayUrl: string, method: string, path: string, token: string | undefined, body: unknown, expected: number) {
  const response = await fetch(`${gatewayUrl}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  if (response.status !== expected) throw new Error(`fuzz world: ${method} ${path} answered ${response.status}, not ${expected}: ${text.slice(0, 500)}`);
  // biome-ignore lint/suspicious/noExplicitAny: setup reads whatever JSON the route answers.
  return (text ? JSON.parse(text) : undefined) as any;
}

async function login(gatewayUrl: string, email: string, password: string): Promise<{ access: string; refresh: string } | undefined> {
  const response = await fetch(`${gatewayUrl}/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
    signal: AbortSignal.timeout(15_000),
  });
  if (response.status !== 200) return undefined;
  const json = (await response.json()) as { session?: { access_token: string; refresh_token: string } };
  return json.session ? { access: json.session.access_token, refresh: json.session.refresh_token } : undefined;
}

// biome-ignore lint/suspicious/noExplicitAny: setup reads whatever JSON the route answers.
type SetupCall = (method: string, path: string, body: unknown, expected: number) => Promise<any>;

/** The objects a run may delete, each made again (with new ids) when one is; named by their main fact. */
type Remakeable = 'teamOrg' | 'invitationId' | 'poolKeyId' | 'webhookId' | 'conversationId';

async function makeInvitation(call: SetupCall, teamOrg: string): Promise<Partial<PartyFacts>> {
  const invitedEmail = `fuzz-invited-${unique()}@example.com`;
  const invitation = await call('POST', `/v1/organizations/${teamOrg}/invitations`, { email: invitedEmail, role: 'developer' }, 201);
  return { invitationId: invitation.invitation_id, invitedEmail };
}

/** Makes the object of `fact` anew in the party's workspaces: the facts that change. */
async function remakeObject(gatewayUrl: string, call: SetupCall, party: Party, facts: PartyFacts, fact: Remakeable): Promise<Partial<PartyFacts>> {
  switch (fact) {
    case 'teamOrg': {
      const org = await call('POST', '/v1/organizations', { name: `fuzz ${party} team ${unique()}` }, 201);
      return { teamOrg: org.organization.org_id, ...(await makeInvitation(call, org.organization.org_id)) };
    }
    case 'invitationId':
      return makeInvitation(call, facts.teamOrg);
    case 'poolKeyId': {
      const key = await createKey(gatewayUrl, facts.session, `fuzz ${party} pool`);
      return { poolKey: key.fullKey, poolKeyId: key.keyId };
    }
    case 'webhookId': {
      const hooks = `/v1/workspaces/${facts.personalWorkspace}/webhooks`;
      const webhook = await call('POST', hooks, { url: receiverUrl, events: [] }, 201);
      const delivery = await call('POST', `${hooks}/${webhook.webhook_id}/test`, {}, 202);
      return { webhookId: webhook.webhook_id, webhookSecret: webhook.secret, deliveryId: delivery.delivery_id };
    }
    case 'conversationId': {
      const conversationTitle = `fuzz ${party} conversation ${unique()}`;
      const conversation = await call('POST', '/v1/conversations', { title: conversationTitle }, 201);
      const message = await call('POST', `/v1/conversations/${conversation.conversation_id}/messages`, { role: 'user', content: `hello ${unique()}` }, 201);
      return { conversationId: conversation.conversation_id, conversationTitle, messageId: message.message_id };
    }
  }
}

const remakeable: Remakeable[] = ['teamOrg', 'invitationId', 'poolKeyId', 'webhookId', 'conversationId'];

/** A new user with one of everything, made through the REST surface like a customer would. */
async function buildParty(gatewayUrl: string, party: Party): Promise<PartyState> {
  const user = await registerUserWithPassword(gatewayUrl, `fuzz-${party}`);
  const session = await login(gatewayUrl, user.email, user.password);
  if (!session) throw new Error('fuzz world: a new user could not sign in');
  const token = user.accessToken;
  const call: SetupCall = (method, path, body, expected) => setupCall(gatewayUrl, method, path, token, body, expected);
  const fullName = `Fuzz ${party} ${unique()}`;
  await call('PATCH', '/v1/account', { full_name: fullName }, 200);
  const apiKey = await createKey(gatewayUrl, token, `fuzz ${party} auth`);
  const revokedKey = await createKey(gatewayUrl, token, `fuzz ${party} revoked`);
  await call('DELETE', `/v1/keys/${revokedKey.keyId}`, undefined, 200);
  const checkout = await call('POST', '/v1/billing/checkout', { amount_usd: '5.00', idempotency_key: `fuzz-${unique()}` }, 201);
  const facts = {
    session: token,
    refreshToken: session.refresh,
    apiKey: apiKey.fullKey,
    revokedKey: revokedKey.fullKey,
    revokedKeyId: revokedKey.keyId,
    userId: user.userId,
    email: user.email,
    fullName,
    personalWorkspace: user.workspaceId,
    checkoutId: checkout.checkout_id,
    checkoutToken: new URL(checkout.checkout_url).pathname.split('/').pop()!,
  } as PartyFacts;
  for (const fact of remakeable.filter((f) => f !== 'invitationId')) Object.assign(facts, await remakeObject(gatewayUrl, call, party, facts, fact));
  return { password: user.password, hidden: [apiKey.keyId, session.access], facts };
}

/** The facts that act as a party: whoever sends one may see that party's data. */
const credentials: Fact[] = ['session', 'refreshToken', 'apiKey', 'poolKey'];

/**
 * Facts a request may see because it sent another one: a checkout's token is the capability to
 * its checkout, whose page links back to the dashboard of its workspace.
 */
function impliedBy(facts: PartyFacts, sentText: string): string[] {
  return sentText.includes(facts.checkoutToken) ? [facts.checkoutId, facts.personalWorkspace] : [];
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

export class FuzzWorld {
  /** Secrets a party sent in a request that was stored (a 2xx write): they may come back to it later. */
  private readonly exposed: Record<Party, Set<string>> = { a: new Set(), b: new Set() };
  /** How many times a party was signed back in or replaced (for the bench's summary). */
  readonly mended: Record<Party, number> = { a: 0, b: 0 };

  private constructor(
    readonly gatewayUrl: string,
    private readonly state: Record<Party, PartyState>,
  ) {}

  static async create(gatewayUrl: string): Promise<FuzzWorld> {
    const [a, b] = await Promise.all(parties.map((party) => buildParty(gatewayUrl, party)));
    return new FuzzWorld(gatewayUrl, { a, b });
  }

  facts(party: Party): Readonly<PartyFacts> {
    return this.state[party].facts;
  }

  /** The text with every placeholder replaced by the current value (unknown ones are left as they are). */
  resolve(text: string): string {
    return text.replace(/\{\{(?:([ab])\.(\w+)|(\w+))\}\}/g, (whole, party: Party | undefined, fact: string | undefined, forged: string | undefined) => {
      if (party && fact && fact in this.state[party].facts) return this.state[party].facts[fact as Fact];
      if (forged) return this.forged(forged) ?? whole;
      return whole;
    });
  }

  /** The party whose credential an Authorization header (with placeholders) carries, if any. */
  actorOf(authorization: string | undefined): Party | undefined {
    const match = /^Bearer \{\{([ab])\.(session|apiKey|poolKey)\}\}$/.exec(authorization ?? '');
    return match ? (match[1] as Party) : undefined;
  }

  /**
   * What a response to `actor` must not contain: every secret of the other parties (of both
   * for a request without a party), less those the request itself sent and those the actor
   * stored earlier.
   */
  secretsHiddenFrom(actor: Party | undefined, sentText: string): string[] {
    // A credential anywhere in the request (a refresh token in a body) opens its party's data too.
    const others = parties.filter((party) => party !== actor && !credentials.some((fact) => sentText.includes(this.state[party].facts[fact])));
    return others
      .flatMap((party) => this.secretsOf(party).filter((secret) => !impliedBy(this.state[party].facts, sentText).includes(secret)))
      .filter((secret) => !sentText.includes(secret) && !(actor && this.exposed[actor].has(secret)));
  }

  private secretsOf(party: Party): string[] {
    return [...Object.values(this.state[party].facts), ...this.state[party].hidden];
  }

  /** After a 2xx write: the other party's secrets the request sent may be stored and read back later. */
  noteStored(actor: Party, sentText: string): void {
    for (const party of parties) {
      if (party === actor) continue;
      for (const secret of this.secretsOf(party)) if (sentText.includes(secret)) this.exposed[actor].add(secret);
    }
  }

  /**
   * After a 401 to a party's credential: signs it back in when its session ended (a logout),
   * or replaces it with a new user when it cannot (its sign-in locked by the fuzzer's wrong
   * passwords, its account gone).
   */
  async mend(party: Party): Promise<void> {
    const current = this.state[party];
    const works = async (token: string) =>
      (await fetch(`${this.gatewayUrl}/v1/account`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(15_000) })).status === 200;
    if ((await works(current.facts.session)) && (await works(current.facts.apiKey))) return;
    this.mended[party] += 1;
    if (await works(current.facts.apiKey)) {
      const session = await login(this.gatewayUrl, current.facts.email, current.password);
      if (session) {
        current.hidden.push(current.facts.session, current.facts.refreshToken);
        current.facts.session = session.access;
        current.facts.refreshToken = session.refresh;
        return;
      }
    }
    this.state[party] = await buildParty(this.gatewayUrl, party);
  }

  /** After a 2xx DELETE: the object it named (the path's last segment) is made again, so later runs still find one. */
  async remakeDeleted(lastSegment: string): Promise<void> {
    for (const party of parties) {
      if (!remakeable.some((fact) => this.state[party].facts[fact] === lastSegment)) continue;
      // Its session may have ended meanwhile (a logout of another run); a replaced party has all new objects.
      await this.mend(party);
      const state = this.state[party];
      const fact = remakeable.find((f) => state.facts[f] === lastSegment);
      if (!fact) continue;
      const call: SetupCall = (method, path, body, expected) => setupCall(this.gatewayUrl, method, path, state.facts.session, body, expected);
      const changed = await remakeObject(this.gatewayUrl, call, party, state.facts, fact);
      // The old values must not leak either.
      state.hidden.push(...(Object.keys(changed) as Fact[]).map((key) => state.facts[key]));
      Object.assign(state.facts, changed);
    }
  }

  private forged(name: string): string | undefined {
    const [header, payload, signature] = this.state.a.facts.session.split('.');
    if (!payload) return undefined;
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    switch (name) {
      case 'forgedJwt':
        return `${header}.${base64url({ ...claims, sub: this.state.b.facts.userId })}.${signature}`;
      case 'expiredJwt':
        return `${header}.${base64url({ ...claims, iat: 1_600_000_000, exp: 1_600_000_900 })}.${signature}`;
      case 'unsignedJwt':
        return `${base64url({ alg: 'none', typ: 'JWT' })}.${payload}.`;
      default:
        return undefined;
    }
  }
}
