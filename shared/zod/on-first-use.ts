import { globalRegistry } from "zod/mini";

/**
 * The schema `build` makes, made the first time anything touches it. A module defines its schemas
 * at the top level as before, and an isolate builds only the ones its requests use: building
 * every schema at import was most of the worker's global scope.
 *
 * What the module exports is a stand-in object, the one everything holds (other schemas, the
 * OpenAPI document's registry), so identity is kept. Its prototype is at first a Proxy that
 * builds the schema on any read; the stand-in's prototype then becomes the schema itself, so
 * every later read is an ordinary prototype lookup (zod reads a schema's `_zod` on every parse).
 * The metadata `build` gave the schema (a description) is registered for the stand-in as well,
 * where zod looks it up.
 */
export function onFirstUse<S extends object>(build: () => S): S {
  const standIn = Object.create(null) as S;
  const built = (): S => {
    const schema = build();
    Object.setPrototypeOf(standIn, schema);
    const metadata = globalRegistry.get(schema as never);
    if (metadata !== undefined) globalRegistry.add(standIn as never, metadata);
    return schema;
  };
  Object.setPrototypeOf(
    standIn,
    new Proxy(Object.create(null), {
      get: (_, key, receiver) => Reflect.get(built(), key, receiver),
      has: (_, key) => Reflect.has(built(), key),
      set: (_, key, value, receiver) => Reflect.set(built(), key, value, receiver),
    }),
  );
  return standIn;
}
