import { readFile } from 'node:fs/promises';
import { TestAuthenticator } from '@switchboard/testkit/account-helpers';
import { tokenOf, waitForMail } from '@switchboard/testkit/mailbox';
import { newUser, signUp } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';
import { checkPage, dashboardSuiteOfFile, expectHeading, input, invalidFieldText, openDashboard, openMail, signInThroughUi } from './dashboard-browser.js';

/**
 * The sign-in and account pages of the dashboard in Chromium, against the whole mesh: sign up,
 * confirm the address with the mailed token, turn 2FA on (the secret the page shows next to its
 * QR code feeds a test authenticator), keep the recovery codes, sign out and in again with a
 * code, deactivate; reset a forgotten password. Every page state is checked for CSP
 * violations and serious accessibility findings, and an API error shows at the field it names.
 */

const suite = dashboardSuiteOfFile();

describe('the account pages', () => {
  it('sign up, confirm the address, turn 2FA on, keep the recovery codes, sign in with a code, deactivate', async () => {
    const user = newUser();
    const dashboard = await openDashboard(suite, '/app/sign-up');
    const { page } = dashboard;
    await expectHeading(page, 'Create an account');

    // A too-short password: the API's error names the field, which shows it.
    await page.getByLabel('Email address').fill(user.email);
    await page.getByLabel('Password', { exact: true }).fill('short');
    await page.getByRole('button', { name: 'Create account' }).click();
    expect(await invalidFieldText(page, 'password')).toContain('The password must be at least 8 characters long.');
    expect(await input(page, 'email').getAttribute('aria-invalid')).toBeNull();
    // The field with the error has the focus.
    expect(
      await input(page, 'password').evaluate((element) => element === (element.ownerDocument as unknown as { activeElement: unknown }).activeElement),
    ).toBe(true);
    await checkPage(dashboard, 'sign-up-error');

    await page.getByLabel('Password', { exact: true }).fill(user.password);
    await page.getByLabel('Full name').fill(user.full_name);
    await page.getByRole('button', { name: 'Create account' }).click();
    await expectHeading(page, 'Confirm your email address');
    await page.getByText(user.email).first().waitFor();
    await checkPage(dashboard, 'verify-email');

    const verification = tokenOf(await waitForMail(suite.mailboxDir, user.email, 'email_verification'));
    await page.getByLabel('Token from the mail').fill(verification);
    await page.getByRole('button', { name: 'Confirm address' }).click();
    await expectHeading(page, 'Email address confirmed');
    await page.getByRole('link', { name: 'Go to your account' }).click();
    await expectHeading(page, 'Account');
    await page.getByText('confirmed', { exact: true }).waitFor();
    await checkPage(dashboard, 'account');

    // 2FA: the password again, then the QR code (a data: URL image) and the same secret as text.
    const twoFactor = page.getByRole('region', { name: 'Two-factor authentication' });
    await twoFactor.getByLabel('Your password').fill(user.password);
    await twoFactor.getByRole('button', { name: 'Set up two-factor authentication' }).click();
    const qr = twoFactor.getByRole('img', { name: /QR code/ });
    await qr.waitFor();
    expect(await qr.getAttribute('src')).toMatch(/^data:image\/png;base64,[A-Za-z0-9+/]+=*$/);
    const secret = (await twoFactor.getByTestId('totp-secret').innerText()).trim();
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    // A Copy button next to it, which fills the clipboard.
    await dashboard.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: suite.mesh.gatewayUrl });
    await twoFactor.getByRole('button', { name: 'Copy' }).click();
    await twoFactor.getByText('Copied to the clipboard.').waitFor();
    expect(
      await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText()),
    ).toBe(secret);
    await checkPage(dashboard, 'two-factor-setup');
    const authenticator = new TestAuthenticator(secret);
    await twoFactor.getByLabel('Code from the authenticator app').fill(await authenticator.code());
    await twoFactor.getByRole('button', { name: 'Turn on' }).click();

    // The recovery codes, shown once, with a download of the same codes.
    const codes = twoFactor.getByRole('list', { name: 'Recovery codes' }).getByRole('listitem');
    await expect.poll(() => codes.count()).toBe(10);
    const shown = await codes.allInnerTexts();
    const link = twoFactor.getByRole('link', { name: 'Download the codes' });
    expect(await link.getAttribute('download')).toBe('switchboard-recovery-codes.txt');
    expect(await link.getAttribute('href')).toMatch(/^blob:/);
    const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
    const saved = await readFile((await download.path())!, 'utf8');
    for (const code of shown) expect(saved).toContain(code);
    await checkPage(dashboard, 'recovery-codes');
    await twoFactor.getByRole('button', { name: 'I have saved them' }).click();
    await twoFactor.getByText('10 unused recovery codes are left').waitFor();
    expect(await codes.count()).toBe(0);

    // Sign out, then in: the password, then a code of the app.
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await expectHeading(page, 'Sign in');
    await page.getByText('You signed out.').waitFor();
    await checkPage(dashboard, 'sign-in');
    await page.getByLabel('Email address').fill(user.email);
    await page.getByLabel('Password', { exact: true }).fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expectHeading(page, 'Two-factor authentication');
    await checkPage(dashboard, 'sign-in-code');
    await page.getByLabel('Code from the authenticator app').fill(await authenticator.code());
    await page.getByRole('button', { name: 'Continue' }).click();
    // Back on the page that was open when the session ended.
    await expectHeading(page, 'Account');
    await page.getByText(/Two-factor authentication is on since/).waitFor();

    // Deactivation asks for a confirmation, then the password and a code; the session ends.
    const danger = page.getByRole('region', { name: 'Deactivate the account' });
    await danger.getByLabel('Your password').fill(user.password);
    await danger.getByLabel('Code from the authenticator app').fill(await authenticator.code());
    await danger.getByRole('button', { name: 'Deactivate my account' }).click();
    expect(await invalidFieldText(page, 'confirm')).toContain('Tick the box');
    await checkPage(dashboard, 'deactivate-error');
    await danger.getByRole('checkbox').check();
    await danger.getByRole('button', { name: 'Deactivate my account' }).click();
    await expectHeading(page, 'Sign in');
    await page.getByText(/Your account is deactivated/).waitFor();
    const refused = await suite.call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    expect(refused.status, refused.text).toBe(401);
    await dashboard.context.close();
  });

  it('saves the name, changes the password, ends the other sessions, and goes to sign-in when the session ends elsewhere', async () => {
    const user = await signUp(suite.call);
    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, user.email, user.password);
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Account' }).click();
    await expectHeading(page, 'Account');

    const profile = page.getByRole('region', { name: 'Profile' });
    await profile.getByLabel('Full name').fill('   ');
    await profile.getByRole('button', { name: 'Save name' }).click();
    expect(await invalidFieldText(page, 'full_name')).toMatch(/name/i);
    await profile.getByLabel('Full name').fill('Ada King');
    await profile.getByRole('button', { name: 'Save name' }).click();
    await profile.getByText('Your name is saved.').waitFor();
    expect((await suite.call('GET', '/v1/account', { token: user.token })).json.full_name).toBe('Ada King');

    // The password: a wrong current one is refused at its field; the REST session (another one) ends.
    const password = page.getByRole('region', { name: 'Password' });
    await password.getByLabel('Current password').fill('not the password at all');
    await password.getByLabel('New password').fill('a new passphrase for ada');
    await password.getByRole('button', { name: 'Change password' }).click();
    expect(await invalidFieldText(page, 'current_password')).toBeTruthy();
    await checkPage(dashboard, 'password-error');
    await password.getByLabel('Current password').fill(user.password);
    await password.getByRole('button', { name: 'Change password' }).click();
    await password.getByText(/Your password is changed/).waitFor();
    expect((await suite.call('GET', '/v1/account', { token: user.token })).json.error.code).toBe('session_revoked');

    // Another session, then "sign out of other sessions" from the page ends it.
    const other = await suite.call('POST', '/v1/auth/login', { body: { email: user.email, password: 'a new passphrase for ada' } });
    expect(other.status, other.text).toBe(200);
    await page.getByRole('button', { name: 'Sign out of other sessions' }).click();
    await page.getByText('Every other session is signed out.').waitFor();
    expect((await suite.call('GET', '/v1/account', { token: other.json.session.access_token })).json.error.code).toBe('session_revoked');
    // This session goes on, its cookie too: a reload keeps it.
    await page.reload();
    await expectHeading(page, 'Account');

    // Every session ended from elsewhere: the page's next call sends it to sign-in, saying why.
    const elsewhere = await suite.call('POST', '/v1/auth/login', { body: { email: user.email, password: 'a new passphrase for ada' } });
    expect((await suite.call('POST', '/v1/auth/logout', { token: elsewhere.json.session.access_token, body: { scope: 'global' } })).status).toBe(204);
    await profile.getByRole('button', { name: 'Save name' }).click();
    await expectHeading(page, 'Sign in');
    await page.getByText(/this session was ended from another place/).waitFor();
    expect(new URL(page.url()).search).toBe(`?next=${encodeURIComponent('/account')}`);
    await checkPage(dashboard, 'signed-out-elsewhere');
    await dashboard.context.close();
  });

  it('keeps the session over a reload, signs out on the email page, lists the sessions and signs out one at a time', async () => {
    const user = newUser();
    const dashboard = await openDashboard(suite, '/app/sign-up');
    const { page, context } = dashboard;
    await page.getByLabel('Email address').fill(user.email);
    await page.getByLabel('Password', { exact: true }).fill(user.password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await expectHeading(page, 'Confirm your email address');
    const signedInNotice = page.getByText('Your account is created and you are signed in.');
    await signedInNotice.waitFor();
    // The refresh token is a cookie the page cannot read, for the refresh path only; a reload renews the session with it.
    expect(await context.cookies()).toEqual([expect.objectContaining({ name: 'sb_refresh', path: '/v1/auth/refresh', httpOnly: true, sameSite: 'Strict' })]);
    await page.reload();
    await page.locator('.user-email', { hasText: user.email }).waitFor();

    // Signing out here leaves no "you are signed in", and no cookie.
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.locator('.user-email').waitFor({ state: 'detached' });
    await expectHeading(page, 'Confirm your email address');
    expect(await signedInNotice.count()).toBe(0);
    expect(await context.cookies()).toEqual([]);
    await page.reload();
    await expectHeading(page, 'Confirm your email address');
    expect(await page.locator('.user-email').count()).toBe(0);

    await page.goto(`${suite.mesh.gatewayUrl}/app/sign-in`);
    await signInThroughUi(page, user.email, user.password);
    const elsewhere = await suite.call('POST', '/v1/auth/login', {
      body: { email: user.email, password: user.password },
      headers: { 'user-agent': 'Laptop browser/1.0' },
    });
    expect(elsewhere.status, elsewhere.text).toBe(200);
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Sessions' }).click();
    await expectHeading(page, 'Sessions');
    const rows = page.getByRole('region', { name: 'Signed-in sessions' }).locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(2);
    expect(await rows.nth(0).innerText()).toContain('Laptop browser/1.0');
    expect(await rows.nth(1).innerText()).toContain('This session');
    await checkPage(dashboard, 'sessions');

    await rows
      .nth(0)
      .getByRole('button', { name: /^Sign out this one/ })
      .click();
    await page.getByRole('button', { name: 'Sign out the session' }).click();
    await page.getByText('The session of Laptop browser/1.0 is signed out').waitFor();
    await expect.poll(() => rows.count()).toBe(1);
    expect((await suite.call('GET', '/v1/account', { token: elsewhere.json.session.access_token })).json.error.code).toBe('session_revoked');
    await checkPage(dashboard, 'sessions-one-left');

    await rows
      .nth(0)
      .getByRole('button', { name: /^Sign out this one/ })
      .click();
    await page.getByRole('button', { name: 'Sign out the session' }).click();
    await expectHeading(page, 'Sign in');
    await page.getByText('You signed out.').waitFor();
    await dashboard.context.close();
  });

  it('resets a forgotten password with the mailed token; a refused password shows at its field', async () => {
    const user = await signUp(suite.call);
    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await expectHeading(page, 'Sign in');
    await page.getByRole('link', { name: 'Forgot your password?' }).click();
    await expectHeading(page, 'Reset your password');
    await page.getByLabel('Email address').fill(user.email);
    await page.getByRole('button', { name: 'Mail me a reset token' }).click();
    await page.getByText(/a reset token is on its way/).waitFor();
    await checkPage(dashboard, 'reset-password');

    await page.getByRole('link', { name: 'I have the token' }).click();
    await expectHeading(page, 'Set a new password');
    const token = tokenOf(await waitForMail(suite.mailboxDir, user.email, 'password_reset_request'));
    await page.getByLabel('Token from the reset mail').fill(token);
    await page.getByLabel('New password', { exact: true }).fill(user.email);
    await page.getByRole('button', { name: 'Set the new password' }).click();
    expect(await invalidFieldText(page, 'new_password')).toMatch(/email address/i);
    expect(await input(page, 'token').getAttribute('aria-invalid')).toBeNull();
    await checkPage(dashboard, 'reset-password-error');

    const newPassword = 'a fresh passphrase for the dashboard';
    await page.getByLabel('New password', { exact: true }).fill(newPassword);
    await page.getByRole('button', { name: 'Set the new password' }).click();
    await expectHeading(page, 'Sign in');
    await page.getByText(/Your password is changed/).waitFor();
    await signInThroughUi(page, user.email, newPassword);
    expect(dashboard.problems).toEqual([]);
    await dashboard.context.close();
  });

  it('follows the link of the reset mail (its HTML part, as a reader clicks it) to a new password, and signs in with it', async () => {
    const user = await signUp(suite.call);
    expect((await suite.call('POST', '/v1/auth/password-reset', { body: { email: user.email } })).status).toBe(202);
    const mail = await waitForMail(suite.mailboxDir, user.email, 'password_reset_request');
    const watched = await openMail(suite, mail);
    const { page } = watched;
    await page.getByRole('link', { name: 'Choose a new password' }).click();

    await expectHeading(page, 'Set a new password');
    expect(await input(page, 'token').inputValue()).toBe(tokenOf(mail));
    // The token is taken off the address once the form has it.
    await expect.poll(() => new URL(page.url()).hash).toBe('');
    expect(new URL(page.url()).pathname).toBe('/app/reset-password/confirm');
    const newPassword = 'the passphrase the mailed link set';
    await page.getByLabel('New password', { exact: true }).fill(newPassword);
    await page.getByRole('button', { name: 'Set the new password' }).click();
    await expectHeading(page, 'Sign in');
    await page.getByText(/Your password is changed/).waitFor();
    await signInThroughUi(page, user.email, newPassword);
    expect(watched.problems).toEqual([]);
    await watched.context.close();
  });

  it('follows the link of the verification mail to confirm the address; a new mail can be asked for on the page', async () => {
    const user = await signUp(suite.call);
    const first = await waitForMail(suite.mailboxDir, user.email, 'email_verification');
    const dashboard = await openMail(suite, first);
    const { page } = dashboard;
    await page.getByRole('link', { name: 'Confirm your email address' }).click();
    await expectHeading(page, 'Confirm your email address');
    expect(await input(page, 'token').inputValue()).toBe(tokenOf(first));
    // Signed out: the address is typed in.
    const resend = page.getByRole('region', { name: 'No mail?' });
    await resend.getByLabel('Email address').fill(user.email);
    await resend.getByRole('button', { name: 'Mail me a new link' }).click();
    await resend.getByText(/a new link is on its way/).waitFor();
    await checkPage(dashboard, 'verify-email-resent');
    const second = await waitForMail(suite.mailboxDir, user.email, 'email_verification', 2);
    expect(tokenOf(second)).not.toBe(tokenOf(first));
    await page.getByRole('button', { name: 'Confirm address' }).click();
    await expectHeading(page, 'Email address confirmed');
    expect(dashboard.problems).toEqual([]);
    await dashboard.context.close();
  });
});
