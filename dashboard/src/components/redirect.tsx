import { useEffect } from 'react';
import { useRouter } from '../router';

/** Replaces the current history entry with `to` (a page the visitor may not see here). */
export function Redirect({ to }: { to: string }) {
  const { navigate } = useRouter();
  useEffect(() => navigate(to, { replace: true }), [navigate, to]);
  return null;
}
