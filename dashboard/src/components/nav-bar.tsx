import { can } from '../permissions';
import { Link, useRouter } from '../router';
import { routes } from '../routes';
import { useSession } from '../session';

/** The pages the user's role in the current workspace may open; the current one is marked. */
export function NavBar() {
  const { role } = useSession();
  const { location } = useRouter();
  const items = routes.filter((route) => route.nav && (!route.action || can(role, route.action)));
  return (
    <nav className="nav" aria-label="Dashboard">
      <ul>
        {items.map((route) => {
          const current = location.path === route.path || location.path.startsWith(`${route.path}/`);
          return (
            <li key={route.path}>
              <Link to={route.path} aria-current={current ? 'page' : undefined}>
                {route.nav}
              </Link>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}
