import { uuidv7 } from "../uuid/index.ts";

/** The header that names a request, in and out. */
export const REQUEST_ID_HEADER = "x-request-id";

/**
 * A request id a client may choose: 1–128 letters, digits, `-`, `_`, `.` or `:` (what UUIDs,
 * ULIDs and most tracing ids are made of). Anything else could not be echoed as a header or
 * searched as a log field as it is.
 */
export const REQUEST_ID_PATTERN = "^[A-Za-z0-9._:-]{1,128}$";
const CLIENT_REQUEST_ID = new RegExp(REQUEST_ID_PATTERN);

/** The client's request id when it is one, else a new one (`req_` + 32 hex digits of a UUIDv7). */
export function requestIdOf(header: string | undefined): string {
  if (header !== undefined && CLIENT_REQUEST_ID.test(header)) return header;
  return `req_${uuidv7().replaceAll("-", "")}`;
}
