import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootMesh, expectErrorBody, newUser, restClient } from './mesh.js';

/** Conversations and messages through REST (SPEC §6). */

let mesh: Mesh;
let call: ReturnType<typeof restClient>;

beforeAll(async () => {
  mesh = await bootMesh();
  call = restClient(mesh.gatewayUrl);
});

afterAll(async () => {
  await mesh?.stop();
});

async function signUp(): Promise<string> {
  const response = await call('POST', '/v1/auth/register', { body: newUser() });
  expect(response.status, response.text).toBe(201);
  return response.json.session.access_token;
}

describe('conversations', () => {
  it('creates, reads, updates and deletes a conversation with its messages', async () => {
    const token = await signUp();
    const created = await call('POST', '/v1/conversations', { token, body: { title: 'Support', metadata: { user: 'u1' } } });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({ conversation_id: expect.stringMatching(/^conv_/), title: 'Support', metadata: { user: 'u1' } });
    const id = created.json.conversation_id;
    const message = await call('POST', `/v1/conversations/${id}/messages`, { token, body: { role: 'user', content: 'Hello 👋' } });
    expect(message.status, message.text).toBe(201);
    expect(message.json).toMatchObject({ message_id: expect.stringMatching(/^msg_/), conversation_id: id, role: 'user', content: 'Hello 👋' });
    const listed = await call('GET', `/v1/conversations/${id}/messages`, { token });
    expect(listed.json.data).toHaveLength(1);
    expect((await call('PATCH', `/v1/conversations/${id}`, { token, body: { title: 'Renamed' } })).json).toMatchObject({
      title: 'Renamed',
      metadata: { user: 'u1' },
    });
    expect((await call('DELETE', `/v1/conversations/${id}`, { token })).status).toBe(204);
    expectErrorBody(await call('GET', `/v1/conversations/${id}`, { token }), 404, 'conversation_not_found');
  });
});
