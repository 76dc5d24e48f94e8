import type { ModelInfo } from "../models/index.ts";
import type { ModelRequestLine } from "../protocol/index.ts";
import type { ModelPrompt } from "../providers/index.ts";
import type { TaskScope } from "./task-scope.ts";

/** What a request line's channels held, as JSON, to write the next line's only when they change. */
export interface RequestChannels {
  readonly instructions: string;
  readonly tools: string;
  readonly options: string;
}

/**
 * Writes the `spindle_request` line of a provider request, right before it is sent, so the
 * inspector can rebuild it from the rollout (design §13). The channels equal to the previous
 * line's are left out; the comparison is with the last line this session wrote (`lastRequest`,
 * absent after a load), so the first request after a load writes them all, whatever came before.
 */
export function recordModelRequest(
  scope: TaskScope,
  prompt: ModelPrompt,
  model: ModelInfo,
  kind: ModelRequestLine["kind"],
): void {
  const options: NonNullable<ModelRequestLine["options"]> = {
    parallel_tool_calls: prompt.parallel_tool_calls,
    ...(prompt.reasoning === undefined ? {} : { reasoning: prompt.reasoning }),
    ...(prompt.text === undefined ? {} : { text: prompt.text }),
    input_modalities: [...model.inputModalities],
  };
  const channels: RequestChannels = {
    instructions: prompt.instructions,
    tools: JSON.stringify(prompt.tools),
    options: JSON.stringify(options),
  };
  const previous = scope.state.lastRequest;
  const payload: ModelRequestLine = { kind, model: model.slug };
  if (previous?.instructions !== channels.instructions) payload.instructions = prompt.instructions;
  if (previous?.tools !== channels.tools) payload.tools = [...prompt.tools];
  if (previous?.options !== channels.options) payload.options = options;
  scope.deps.sink.append({ type: "spindle_request", payload });
  scope.state.lastRequest = channels;
  scope.deps.requestSent?.({
    model: model.slug,
    kind,
    instructions: prompt.instructions,
    tools: prompt.tools,
    input: prompt.input,
  });
}
