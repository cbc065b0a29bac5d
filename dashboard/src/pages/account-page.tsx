import { Page } from '../components/page';
import { DeactivateSection } from './account/deactivate-section';
import { ExportSection } from './account/export-section';
import { PasswordSection } from './account/password-section';
import { ProfileSection } from './account/profile-section';
import { SessionsSection } from './account/sessions-section';
import { TwoFactorSection } from './account/two-factor-section';

/**
 * The signed-in user's own account; nothing here depends on the workspace. At
 * `/account/exports/:exportId` (the data-export mail's link) it shows that export to download.
 */
export function AccountPage({ params }: { params: Record<string, string> }) {
  return (
    <Page title="Account">
      <ProfileSection />
      <PasswordSection />
      <TwoFactorSection />
      <SessionsSection />
      <ExportSection exportId={params.exportId} />
      <DeactivateSection />
    </Page>
  );
}
