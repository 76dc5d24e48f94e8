import { describe, expect, it } from "vitest";
import {
  parseTemplate,
  renderTemplate,
  safeThreadId,
  TemplateError,
} from "../../../shared/webhooks/index.ts";

const scope = {
  body: {
    repository: { id: 42, full_name: "octo/repo" },
    issue: { number: 7, labels: [{ name: "bug" }] },
    comment: { body: "Please look" },
    draft: false,
    none: null,
  },
  headers: { "x-github-event": "issue_comment" },
};

describe("templates over a delivery", () => {
  it("renders body paths (objects by key, arrays by index) and headers", () => {
    const template = parseTemplate(
      "gh-{{body.repository.id}}-{{ body.issue.number }} {{body.issue.labels.0.name}} {{headers.X-GitHub-Event}}",
    );
    expect(renderTemplate(template, scope)).toEqual({ text: "gh-42-7 bug issue_comment" });
  });

  it("inserts a string as it is and anything else as JSON; {{body}} is the whole body", () => {
    expect(renderTemplate(parseTemplate("{{body.repository}}|{{body.draft}}"), scope)).toEqual({
      text: '{"id":42,"full_name":"octo/repo"}|false',
    });
    expect(renderTemplate(parseTemplate("{{body}}"), { body: [1], headers: {} })).toEqual({
      text: "[1]",
    });
  });

  it("renders a missing or null value as empty, or names it when every value is required", () => {
    const template = parseTemplate("a{{body.nope.deeper}}b{{body.none}}c");
    expect(renderTemplate(template, scope)).toEqual({ text: "abc" });
    expect(renderTemplate(template, scope, true)).toEqual({ missing: "{{body.nope.deeper}}" });
    expect(renderTemplate(parseTemplate("{{headers.absent}}"), scope, true)).toEqual({
      missing: "{{headers.absent}}",
    });
  });

  it("does not read inherited properties", () => {
    expect(renderTemplate(parseTemplate("{{body.constructor}}"), scope, true)).toEqual({
      missing: "{{body.constructor}}",
    });
  });

  it("refuses placeholders it cannot read", () => {
    const errors = [
      "{{env.SECRET}}",
      "{{body.}}",
      "{{headers}}",
      "{{headers.a.b}}",
      "a{{b",
      "c}}",
    ].map((source) => {
      try {
        parseTemplate(source);
        return "parsed";
      } catch (err) {
        return err instanceof TemplateError ? "refused" : "threw";
      }
    });
    expect(errors).toEqual(["refused", "refused", "refused", "refused", "refused", "refused"]);
  });
});

describe("a thread id from rendered text", () => {
  it("keeps an id that follows the rules", () => {
    expect(safeThreadId("gh-42-7")).toBe("gh-42-7");
  });

  it("turns each other character into _", () => {
    expect(safeThreadId("gh-octo/repo#7 é")).toBe("gh-octo_repo_7__");
  });

  it("shortens a long id to 64 characters: its start, _, and a digest that tells two apart", () => {
    const a = safeThreadId(`${"x".repeat(70)}a`) ?? "";
    const b = safeThreadId(`${"x".repeat(70)}b`) ?? "";
    expect([a.length, b.length]).toEqual([64, 64]);
    expect(a.slice(0, 41)).toBe(`${"x".repeat(40)}_`);
    expect(a).toMatch(/^[A-Za-z0-9_-]{64}$/);
    expect(a).not.toBe(b);
    expect(safeThreadId(`${"x".repeat(70)}a`)).toBe(a);
  });

  it("gives none for an empty text", () => {
    expect(safeThreadId("")).toBe(undefined);
  });
});
