import type { RpcResult } from "../../../shared/api/index.ts";

/** The value of a successful result; a failure throws, naming its code. */
export function okValue<T>(result: RpcResult<T>): T {
  if (!result.ok) throw new Error(`${result.error.code}: ${result.error.detail}`);
  return result.value;
}
