/**
 * A switch from a model that reads images to a text-only one (Codex's
 * `model_change_from_image_to_text_strips_prior_image_content`): the text-only model's request
 * holds the placeholder text where history holds an image, and history keeps the image, so a
 * switch back sends it again.
 */
import { describe, expect, it } from "vitest";
import type { Prompt } from "../../../shared/protocol/index.ts";
import { drain, newSession } from "../helpers/engine.ts";

const IMAGE = "data:image/png;base64,iVBORw0KGgo=";
const OMITTED = "image content omitted because you do not support image input";

function parts(prompt: Prompt | undefined): string[] {
  return (prompt?.input ?? []).flatMap((item) =>
    item.type === "message" && item.role === "user"
      ? item.content.map((p) => (p.type === "input_image" ? `image:${p.image_url}` : p.text))
      : [],
  );
}

describe("switching from an image model to a text-only one", () => {
  it("sends the placeholder in place of earlier images, keeps them in history, and sends them again after switching back", async () => {
    const h = newSession();
    const withImage = [
      { type: "input_text" as const, text: "what is this?" },
      { type: "input_image" as const, image_url: IMAGE },
    ];
    await drain(h.session.runTurn({ content: withImage }));
    const say = (text: string) => ({ content: [{ type: "input_text" as const, text }] });
    await drain(h.session.runTurn(say("and now?"), { model: "spindle-local-lite" }));
    const textOnly = parts(h.client.prompts[1]);
    expect(textOnly).toContain(OMITTED);
    expect(textOnly.some((p) => p.startsWith("image:"))).toBe(false);
    expect(JSON.stringify(h.session.history.items)).toContain(IMAGE);
    await drain(h.session.runTurn(say("again"), { model: "spindle-local" }));
    expect(parts(h.client.prompts[2])).toContain(`image:${IMAGE}`);
  });
});
