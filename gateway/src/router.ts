import type { DescField } from '@bufbuild/protobuf';
import { type Route, type Segment, unversionedAlias } from './routes.js';

interface Node {
  literals: Map<string, Node>;
  variable?: { field: DescField; node: Node };
  routes: Map<string, Route>;
}

const newNode = (): Node => ({ literals: new Map(), routes: new Map() });

export type Match = { route: Route; pathValues: Map<DescField, string> } | { allowed: string[] } | undefined;

/** Matches request paths to routes: literal segments win over variables. */
export class Router {
  private readonly root = newNode();

  constructor(routes: Route[]) {
    for (const route of routes) {
      this.add(route.segments, route);
      const alias = unversionedAlias(route);
      if (alias) this.add(alias, route);
    }
  }

  private add(segments: Segment[], route: Route): void {
    let node = this.root;
    for (const segment of segments) {
      if ('literal' in segment) {
        let next = node.literals.get(segment.literal);
        if (!next) {
          next = newNode();
          node.literals.set(segment.literal, next);
        }
        node = next;
      } else {
        // Routes may name the variable at one position differently: each keeps its own segments.
        node.variable ??= { field: segment.field, node: newNode() };
        node = node.variable.node;
      }
    }
    if (node.routes.has(route.httpMethod)) throw new Error(`two routes for ${route.httpMethod} ${route.template}`);
    node.routes.set(route.httpMethod, { ...route, segments });
  }

  /** The route for a method and path; `{allowed}` when only the method is wrong (405). */
  match(httpMethod: string, pathname: string): Match {
    const parts = pathname.replace(/\/+$/, '').split('/').slice(1);
    const values: string[] = [];
    const node = this.find(this.root, parts, 0, values);
    if (!node) return undefined;
    const route = node.routes.get(httpMethod);
    if (!route) return { allowed: [...node.routes.keys()] };
    const pathValues = new Map<DescField, string>();
    let index = 0;
    for (const segment of route.segments) {
      if ('field' in segment) pathValues.set(segment.field, values[index++]);
    }
    return { route, pathValues };
  }

  private find(node: Node, parts: string[], depth: number, values: string[]): Node | undefined {
    if (depth === parts.length) return node.routes.size > 0 ? node : undefined;
    const part = parts[depth];
    const literal = node.literals.get(part);
    if (literal) {
      const found = this.find(literal, parts, depth + 1, values);
      if (found) return found;
    }
    if (node.variable && part !== '') {
      let decoded: string;
      try {
        decoded = decodeURIComponent(part);
      } catch {
        return undefined;
      }
      values.push(decoded);
      const found = this.find(node.variable.node, parts, depth + 1, values);
      if (found) return found;
      values.pop();
    }
    return undefined;
  }
}
