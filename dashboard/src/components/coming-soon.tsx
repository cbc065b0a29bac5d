import { Page } from './page';

/** The place of a page still being built. */
export function ComingSoon({ title }: { title: string }) {
  return (
    <Page title={title}>
      <p>Coming soon.</p>
    </Page>
  );
}
