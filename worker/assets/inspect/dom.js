/**
 * A tiny DOM builder. Text always goes in as text nodes (rollout text is untrusted: never
 * innerHTML); attributes are set one by one, `on…` ones as listeners.
 */

const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Appends children: nodes, strings and numbers (as text), arrays (flattened); skips null. */
export function append(el, children) {
  for (const child of children.flat(Number.POSITIVE_INFINITY)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** `h("button", {class: "x", onclick}, "text", child…)`. */
export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);

/** The same for inline SVG elements. */
export const svg = (tag, attrs, ...children) =>
  build(document.createElementNS(SVG_NS, tag), attrs, children);

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}
