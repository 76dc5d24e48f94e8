// workerd's native pass-through stream, which the worker copies uploads into; in Node the
// standard TransformStream behaves the same for one writer and one reader.
if (!("IdentityTransformStream" in globalThis)) {
  Object.assign(globalThis, { IdentityTransformStream: TransformStream });
}
