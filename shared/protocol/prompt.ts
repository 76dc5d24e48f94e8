import { z } from "zod";
import { KnownResponseItemSchema } from "./response-item.ts";
import { FunctionToolSchema } from "./thread-config.ts";

/**
 * The request a provider receives (design §5, §7 `GET …/prompt`): three channels built from one
 * StepContext capture. Providers drop local bookkeeping fields of the items before sending.
 */
export const PromptSchema = z.object({
  instructions: z.string(),
  input: z.array(KnownResponseItemSchema),
  tools: z.array(FunctionToolSchema),
  parallel_tool_calls: z.boolean(),
});
export type Prompt = z.infer<typeof PromptSchema>;
