import { globalRegistry } from "zod/mini";

/** What a zod schema carries that `onFirstUse` reads: its constructor, definition and parent. */
interface Internals {
  _zod: { constr: { call(self: object, def: unknown): unknown }; def: unknown; parent?: unknown };
}

/**
 * The schema `build` makes, made the first time anything touches it. A module defines its schemas
 * at the top level as before, and an isolate builds only the ones its requests use: building
 * every schema at import was most of the worker's global scope.
 *
 * What the module exports is a stand-in object, the one everything holds (other schemas, the
 * OpenAPI document's registry), so identity is kept. Its prototype is at first a Proxy that
 * builds the schema on any read; the stand-in then becomes an instance of the built schema's
 * class on the same definition (as zod makes its own clones), with its parent and metadata (a
 * description), so every later read is an ordinary one on an object of the shape zod's code
 * already meets: no trap, no prototype of its own, on every parse.
 */
export function onFirstUse<S extends object>(build: () => S): S {
  const standIn = Object.create(null) as S;
  const become = (): S => {
    const schema = build();
    Object.setPrototypeOf(standIn, Object.getPrototypeOf(schema));
    const { constr, def, parent } = (schema as unknown as Internals)._zod;
    constr.call(standIn, def);
    if (parent !== undefined) (standIn as unknown as Internals)._zod.parent = parent;
    const metadata = globalRegistry.get(schema as never);
    if (metadata !== undefined) globalRegistry.add(standIn as never, metadata);
    return standIn;
  };
  Object.setPrototypeOf(
    standIn,
    new Proxy(Object.create(null), {
      get: (_, key, receiver) => Reflect.get(become(), key, receiver),
      has: (_, key) => Reflect.has(become(), key),
      set: (_, key, value, receiver) => Reflect.set(become(), key, value, receiver),
    }),
  );
  return standIn;
}
