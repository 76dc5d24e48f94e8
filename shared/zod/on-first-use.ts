import { globalRegistry } from "zod/mini";

/**
 * The schema (or shape of schemas) `build` makes, made the first time anything touches it. A module defines its schemas
 * at the top level as before, and an isolate builds only the ones its requests use: building
 * every schema at import was most of the worker's global scope. What the module exports is a
 * Proxy of the schema, so the one object everything holds (other schemas' shapes, the OpenAPI
 * document's registry) keeps its identity; the metadata `build` gave the schema (a description)
 * is registered on the Proxy as well, where zod looks it up.
 */
export function onFirstUse<S extends object>(build: () => S): S {
  let built: S | undefined;
  const schema = (): S => {
    if (built === undefined) {
      built = build();
      // A shape (a plain object of schemas) has no metadata to carry over.
      const metadata = "_zod" in built ? globalRegistry.get(built as never) : undefined;
      if (metadata !== undefined) globalRegistry.add(proxy as never, metadata);
    }
    return built;
  };
  const proxy: S = new Proxy({} as S, {
    get: (_, key) => Reflect.get(schema(), key),
    has: (_, key) => Reflect.has(schema(), key),
    ownKeys: () => Reflect.ownKeys(schema()),
    // Reported configurable: the Proxy's own target holds none of the schema's properties.
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(schema(), key);
      return descriptor && { ...descriptor, configurable: true };
    },
    getPrototypeOf: () => Reflect.getPrototypeOf(schema()),
    set: (_, key, value) => Reflect.set(schema(), key, value),
    defineProperty: (_, key, descriptor) => Reflect.defineProperty(schema(), key, descriptor),
    deleteProperty: (_, key) => Reflect.deleteProperty(schema(), key),
  });
  return proxy;
}
