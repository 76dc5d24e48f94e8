/**
 * The zod every wire shape is written in: `zod/mini`, whose schemas carry no methods
 * (`z.optional(s)`, `s.check(z.maxLength(n))`), so the bundle keeps only the parts the schemas
 * use and building a schema costs little. Issue messages are zod's English ones, as the full
 * build sets them. Import it as a namespace (`import * as z`), which the bundler can trim.
 */
import { en } from "zod/locales";
import { config } from "zod/mini";

config(en());

export * from "zod/mini";
export { onFirstUse } from "./on-first-use.ts";
