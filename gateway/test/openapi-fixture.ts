// biome-ignore lint/suspicious/noExplicitAny: the document is walked as plain JSON.
export type Json = Record<string, any>;

/**
 * The document with its shared error responses and examples written out in place, as a reader
 * of one operation sees them (Swagger UI resolves the same $refs); other $refs (schemas, headers, parameters) stay.
 */
export function inlineShared(doc: Json): Json {
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve);
    if (!node || typeof node !== 'object') return node;
    const ref = (node as Json).$ref;
    if (typeof ref === 'string' && /^#\/components\/(responses|examples)\//.test(ref)) {
      const [, , kind, name] = ref.split('/');
      return resolve(doc.components[kind][name]);
    }
    return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, resolve(value)]));
  };
  return { ...doc, paths: resolve(doc.paths), webhooks: resolve(doc.webhooks) };
}
