/** Building the page: elements from data (never parsed HTML), JSON as text, badges, redacted values. */

type Attribute = string | number | boolean | null | undefined | ((event: Event) => unknown);
export type Attributes = Record<string, Attribute>;
export type Child = Node | string | number | null | undefined | false | readonly Child[];

const svgTags = new Set(["svg", "g", "rect", "text", "line", "title"]);

/** Builds an element: h("p", { class: "x", onclick: fn }, "text", child). Never parses HTML. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes?: Attributes,
  ...children: Child[]
): HTMLElementTagNameMap[K];
export function h(tag: string, attributes?: Attributes, ...children: Child[]): Element;
export function h(tag: string, attributes: Attributes = {}, ...children: Child[]): Element {
  const element = svgTags.has(tag)
    ? document.createElementNS("http://www.w3.org/2000/svg", tag)
    : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function")
      element.addEventListener(name.slice(2), value as EventListener);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

function append(element: Element, children: readonly Child[]): void {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

export function statusBadge(status: string): HTMLElement {
  return h("span", { class: `badge status-${status}` }, status);
}

/** Data with redacted values marked as such. */
export function showData(element: Element, value: unknown): void {
  element.replaceChildren();
  const parts = json(value).split('"[redacted]"');
  parts.forEach((part, index) => {
    element.append(part);
    if (index < parts.length - 1)
      element.append(h("span", { class: "redacted", title: "redacted by policy" }, "redacted"));
  });
}

/** The message of whatever was thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** An element the shell is known to hold. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`The page has no #${id}`);
  return element as T;
}
