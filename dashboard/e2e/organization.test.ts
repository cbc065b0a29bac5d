import { Mailbox } from '@switchboard/testkit/mailbox';
import { signUp } from '@switchboard/testkit/mesh';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import {
  checkPage,
  dashboardSuiteOfFile,
  expectHeading,
  input,
  invalidFieldText,
  openDashboard,
  openMail,
  restAs,
  settles,
  signInThroughUi,
} from './dashboard-browser.js';

/**
 * The Organization page in Chromium, against the whole mesh: an owner creates an organization
 * and invites a member, who accepts in a browser of their own and finds it in the workspace
 * switcher; roles change, an invitation is revoked, ownership moves, the old owner leaves and
 * the new one deletes the organization. Each role sees only the controls the API allows it, and
 * every page state is checked for CSP violations and serious accessibility findings.
 */

const suite = dashboardSuiteOfFile();

/** Opens a page of the navigation bar; going through another page first makes it load anew. */
async function openFromNav(page: Page, link: string, heading = link): Promise<void> {
  await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: link, exact: true }).click();
  await expectHeading(page, heading);
}

async function reopenOrganization(page: Page): Promise<void> {
  await openFromNav(page, 'Account');
  await openFromNav(page, 'Organization');
}

const switcher = (page: Page) => page.getByLabel('Workspace', { exact: true });
const switcherOptions = (page: Page) => switcher(page).locator('option').allInnerTexts();
const currentWorkspace = (page: Page) => switcher(page).locator('option:checked').innerText();
const roleShown = (page: Page) => page.locator('.role').innerText();

describe('the Organization page', () => {
  it('creates an organization, invites a member who accepts in another browser, changes a role, revokes, transfers, leaves and deletes', async () => {
    const owner = await signUp(suite.call);
    const invitee = await signUp(suite.call);
    const name = `Dashboard org ${Date.now()}`;

    const ownerUi = await openDashboard(suite, '/app/sign-in');
    const { page } = ownerUi;
    await signInThroughUi(page, owner.email, owner.password);
    await openFromNav(page, 'Organization');
    // The personal workspace: no transfer or deletion, since it goes with the account.
    await page.getByText('This is your personal workspace').waitFor();
    expect(await page.getByRole('region', { name: 'Transfer ownership' }).count()).toBe(0);
    expect(await page.getByRole('region', { name: 'Delete the organization' }).count()).toBe(0);

    // A blank name is refused at its field; then the new organization becomes the current workspace.
    const create = page.getByRole('region', { name: 'Create an organization' });
    await create.getByLabel('Name').fill('   ');
    await create.getByRole('button', { name: 'Create organization' }).click();
    expect(await invalidFieldText(page, 'name')).toMatch(/name/i);
    await checkPage(ownerUi, 'organization-create-error');
    await create.getByLabel('Name').fill(name);
    await create.getByRole('button', { name: 'Create organization' }).click();
    await page.getByText(`${name} is created and you are its owner`).waitFor();
    expect(await currentWorkspace(page)).toBe(name);
    expect(await switcherOptions(page)).toEqual([expect.stringMatching(/\(personal\)$/), name]);
    expect(await roleShown(page)).toBe('Role: owner');

    // Inviting: a malformed address at its field, then the invitation, pending.
    const invite = page.getByRole('region', { name: 'Invite a member' });
    await invite.getByLabel('Email address').fill('not an address');
    await invite.getByRole('button', { name: 'Send invitation' }).click();
    expect(await invalidFieldText(page, 'email')).toMatch(/email/i);
    await invite.getByLabel('Email address').fill(invitee.email);
    await invite.getByLabel('Role').selectOption('developer');
    await invite.getByRole('button', { name: 'Send invitation' }).click();
    await invite.getByText(`was mailed to ${invitee.email}`).waitFor();
    const invitations = page.getByRole('region', { name: 'Invitations' });
    const inviteeInvitation = invitations.getByRole('row', { name: new RegExp(invitee.email) });
    await expect.poll(() => inviteeInvitation.innerText(), settles).toMatch(/Developer\s+pending/);
    await checkPage(ownerUi, 'organization');

    // The invitee, in a browser of their own: a wrong token at its field, then the mailed one.
    const token = await new Mailbox(suite.mailboxDir).invitationToken(invitee.email, name);
    const inviteeUi = await openDashboard(suite, '/app/sign-in');
    const other = inviteeUi.page;
    await signInThroughUi(other, invitee.email, invitee.password);
    await openFromNav(other, 'Organization');
    const join = other.getByRole('region', { name: 'Join an organization' });
    await join.getByLabel('Invitation token').fill('not-a-real-token');
    await join.getByRole('button', { name: 'Join' }).click();
    expect(await invalidFieldText(other, 'token')).toContain('The invitation token is not valid.');
    await checkPage(inviteeUi, 'organization-join-error');
    await join.getByLabel('Invitation token').fill(token);
    await join.getByRole('button', { name: 'Join' }).click();
    await other.getByText(`You joined ${name} as Developer`).waitFor();
    expect(await currentWorkspace(other)).toBe(name);
    expect(await switcherOptions(other)).toEqual([expect.stringMatching(/\(personal\)$/), name]);
    expect(await roleShown(other)).toBe('Role: developer');
    // A developer lists the members, may leave, and sees no control of the owner and admins.
    const members = other.getByRole('region', { name: 'Members' });
    await expect.poll(() => members.getByRole('row').count(), settles).toBe(3);
    for (const region of ['Invite a member', 'Invitations', 'Transfer ownership', 'Delete the organization']) {
      expect(await other.getByRole('region', { name: region }).count(), region).toBe(0);
    }
    expect(await members.getByRole('button', { name: /^Manage/ }).count()).toBe(0);
    expect(
      await members
        .getByRole('row', { name: /\(you\)/ })
        .getByRole('button', { name: 'Leave' })
        .count(),
    ).toBe(1);
    await checkPage(inviteeUi, 'organization-developer');

    // The owner: the invitation is accepted; the new member becomes an admin.
    await reopenOrganization(page);
    await expect.poll(() => inviteeInvitation.innerText(), settles).toMatch(/accepted/);
    const ownerMembers = page.getByRole('region', { name: 'Members' });
    const inviteeRow = ownerMembers.getByRole('row', { name: new RegExp(invitee.email) });
    await inviteeRow.getByRole('button', { name: /^Manage/ }).click();
    await page.getByRole('combobox', { name: `Role of ${invitee.email}` }).selectOption('admin');
    await page.getByRole('button', { name: 'Change role' }).click();
    await ownerMembers.getByText(`${invitee.email} is now Admin.`).waitFor();
    await expect.poll(() => inviteeRow.innerText(), settles).toMatch(/Admin/);
    expect((await suite.call('GET', `/v1/organizations/${await orgIdOf(page)}`, { token: invitee.token })).json.role).toBe('admin');

    // Another invitation, revoked after a confirmation: its status says so.
    const stranger = `stranger${Date.now()}@example.com`;
    await invite.getByLabel('Email address').fill(stranger);
    await invite.getByRole('button', { name: 'Send invitation' }).click();
    const strangerInvitation = invitations.getByRole('row', { name: new RegExp(stranger) });
    await strangerInvitation.getByRole('button', { name: /^Revoke/ }).click();
    await checkPage(ownerUi, 'organization-revoke-confirm');
    await invitations.getByRole('button', { name: 'Revoke', exact: true }).click();
    await invitations.getByText(`The invitation of ${stranger} is revoked`).waitFor();
    await expect.poll(() => strangerInvitation.innerText(), settles).toMatch(/revoked/);

    // Ownership moves only once confirmed; the old owner is an admin from then on.
    const transfer = page.getByRole('region', { name: 'Transfer ownership' });
    // The only other member is the one to choose.
    await expect.poll(() => transfer.getByLabel('New owner').locator('option').allInnerTexts(), settles).toEqual([expect.stringContaining(invitee.email)]);
    await transfer.getByRole('button', { name: 'Transfer ownership' }).click();
    expect(await invalidFieldText(transfer, 'confirm')).toContain('Tick the box');
    await transfer.getByRole('checkbox').check();
    await transfer.getByRole('button', { name: 'Transfer ownership' }).click();
    await page.getByText(`${invitee.email} is now the owner of ${name}; you are an admin.`).waitFor();
    await expect.poll(() => roleShown(page), settles).toBe('Role: admin');
    expect(await page.getByRole('region', { name: 'Transfer ownership' }).count()).toBe(0);
    // Nobody manages the owner: no Manage button on the owner's row.
    expect(
      await ownerMembers
        .getByRole('row', { name: new RegExp(invitee.email) })
        .getByRole('button', { name: /^Manage/ })
        .count(),
    ).toBe(0);

    // The old owner leaves: back in the personal workspace, without the organization in the switcher.
    await ownerMembers
      .getByRole('row', { name: /\(you\)/ })
      .getByRole('button', { name: 'Leave' })
      .click();
    await page.getByRole('button', { name: 'Leave the organization' }).click();
    await page.getByText(`You left ${name}. This is your personal workspace.`).waitFor();
    await expect.poll(() => switcherOptions(page), settles).toEqual([expect.stringMatching(/\(personal\)$/)]);

    // The new owner finds their role on opening the page, and deletes the organization.
    await reopenOrganization(other);
    await expect.poll(() => roleShown(other), settles).toBe('Role: owner');
    const remove = other.getByRole('region', { name: 'Delete the organization' });
    await remove.getByRole('checkbox').check();
    await remove.getByRole('button', { name: 'Delete organization' }).click();
    await other.getByText(`${name} is deleted. This is your personal workspace.`).waitFor();
    await expect.poll(() => switcherOptions(other), settles).toEqual([expect.stringMatching(/\(personal\)$/)]);
    await checkPage(inviteeUi, 'organization-deleted');

    await Promise.all([ownerUi.context.close(), inviteeUi.context.close()]);
  }, 60_000);

  it('follows the link of an invitation mail: signed out, signs in first and comes back to join with one click', async () => {
    const owner = await signUp(suite.call);
    const invitee = await signUp(suite.call);
    const name = `Linked org ${Date.now()}`;
    const { organization } = await restAs(suite, owner, 'POST', '/v1/organizations', { name });
    await restAs(suite, owner, 'POST', `/v1/organizations/${organization.org_id}/invitations`, { email: invitee.email, role: 'developer' });
    const mailbox = new Mailbox(suite.mailboxDir);
    const token = await mailbox.invitationToken(invitee.email, name);
    const mail = await mailbox.waitFor((m) => m.kind === 'invitation' && m.to === invitee.email, 'the invitation');

    const dashboard = await openMail(suite, mail);
    const { page } = dashboard;
    await page.getByRole('link', { name: `Join ${name}` }).click();
    await expectHeading(page, 'Accept an invitation');
    await checkPage(dashboard, 'accept-invitation-signed-out');
    await page.getByRole('link', { name: 'Sign in to join' }).click();
    await signInThroughUi(page, invitee.email, invitee.password, 'Accept an invitation');
    expect(await input(page, 'token').inputValue()).toBe(token);
    await checkPage(dashboard, 'accept-invitation');
    await page.getByRole('button', { name: 'Join' }).click();
    await page.getByText(`You joined ${name} as Developer`).waitFor();
    expect(await currentWorkspace(page)).toBe(name);
    expect(dashboard.problems).toEqual([]);
    await dashboard.context.close();
  });
});

/** The organization id the page shows. */
async function orgIdOf(page: Page): Promise<string> {
  return (await page.locator('dd code').first().innerText()).trim();
}
