// `npm run model:example`: local stand-ins of two model wires, for trying the `openai-chat` and
// `anthropic` providers with `npm start`: a Chat Completions host on
// http://127.0.0.1:8932/v1 and a Messages API on http://127.0.0.1:8933/v1 (MODEL_EXAMPLE_CHAT_PORT
// and MODEL_EXAMPLE_ANTHROPIC_PORT change them). They are the stand-ins the test suites use:
// each answers `Echo: …` the last user text, calls a tool when asked `call NAME {json}`, and
// quotes a tool's output back. They take any key.
import { startAnthropicStandIn } from "../test/helpers/anthropic-stand-in.ts";
import { startChatStandIn } from "../test/helpers/chat-stand-in.ts";

const chat = await startChatStandIn({ port: Number(process.env.MODEL_EXAMPLE_CHAT_PORT ?? 8932) });
const anthropic = await startAnthropicStandIn({
  port: Number(process.env.MODEL_EXAMPLE_ANTHROPIC_PORT ?? 8933),
});
console.log(`Chat Completions on ${chat.url}, Messages API on ${anthropic.url}; Ctrl-C stops them`);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(
    signal,
    () => void Promise.all([chat.close(), anthropic.close()]).then(() => process.exit(0)),
  );
}
