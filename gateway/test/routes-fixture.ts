import { Router } from '../src/router.js';
import { buildRoutes, type Route } from '../src/routes.js';

/** The gateway's route table and its router, as the codec and router tests look routes up. */
export const routes = buildRoutes();
export const router = new Router(routes);

export function routeFor(httpMethod: string, template: string): Route {
  const route = routes.find((r) => r.httpMethod === httpMethod && r.template === template);
  if (!route) throw new Error(`no route ${httpMethod} ${template}`);
  return route;
}
