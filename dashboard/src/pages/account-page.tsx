import { Page } from '../components/page';
import { DeactivateSection } from './account/deactivate-section';
import { ExportSection } from './account/export-section';
import { PasswordSection } from './account/password-section';
import { ProfileSection } from './account/profile-section';
import { SessionsSection } from './account/sessions-section';
import { TwoFactorSection } from './account/two-factor-section';

/** The signed-in user's own account; nothing here depends on the workspace. */
export function AccountPage() {
  return (
    <Page title="Account">
      <ProfileSection />
      <PasswordSection />
      <TwoFactorSection />
      <SessionsSection />
      <ExportSection />
      <DeactivateSection />
    </Page>
  );
}
