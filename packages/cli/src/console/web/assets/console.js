// The Tackle console's page script: no framework, no build step, no network beyond this console.
// Pages: #/modules, #/runs, #/memory, #/documents. Every call goes through this console's /api.

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const signOut = document.getElementById("sign-out");

/** Builds an element: h("p", { class: "x", onclick: fn }, "text", child). Never parses HTML. */
function h(tag, attributes = {}, ...children) {
  const svg = ["svg", "g", "rect", "text", "line", "title"].includes(tag);
  const element = svg
    ? document.createElementNS("http://www.w3.org/2000/svg", tag)
    : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(path, options = {}) {
  const init = { method: options.method ?? "GET", headers: {}, credentials: "same-origin" };
  if (options.body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  const body = text === "" ? undefined : JSON.parse(text);
  if (response.status === 401 && path !== "/api/session") {
    showSignIn("Your session ended: sign in again.");
    throw new ApiError(401, body);
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

/** Calls module.tool through the console; the answer is { ok, output | error, ms }. */
function callTool(tool, args) {
  return api("/api/call", { method: "POST", body: { tool, args } });
}

async function callOrThrow(tool, args) {
  const answer = await callTool(tool, args);
  if (!answer.ok) throw Object.assign(new Error(`${answer.error.code}: ${answer.error.message}`), answer);
  return answer.output;
}

// ---------------------------------------------------------------------------------------------------
// Sign-in

function showSignIn(message) {
  // The page shown stops its timers: a poll answered 401 would otherwise redraw this form every tick.
  leavePage();
  leavePage = () => {};
  nav.hidden = true;
  signOut.hidden = true;
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true });
  const status = h("p", { class: "error", role: "alert" }, message ?? "");
  const form = h(
    "form",
    {
      class: "card narrow",
      onsubmit: async (event) => {
        event.preventDefault();
        const ok = await signIn({ token: input.value.trim() });
        if (ok) startRouting();
        else status.textContent = "That token was refused.";
      },
    },
    h("h1", {}, "Sign in"),
    h(
      "p",
      {},
      "Open the sign-in URL that tackle serve printed (it works once), or paste the console token from the token file it named.",
    ),
    h("label", { for: "token" }, "Console token"),
    input,
    h("button", { type: "submit" }, "Sign in"),
    status,
  );
  main.replaceChildren(form);
}

async function signIn(secret) {
  try {
    await api("/api/session", { method: "POST", body: secret });
    return true;
  } catch {
    return false;
  }
}

signOut.addEventListener("click", async () => {
  await api("/api/session", { method: "DELETE" }).catch(() => {});
  stopEvents();
  showSignIn("Signed out.");
});

// ---------------------------------------------------------------------------------------------------
// Routing

const pages = { modules: modulesPage, runs: runsPage, memory: memoryPage, documents: documentsPage };
let leavePage = () => {};

function route() {
  const name = /^#\/(\w+)/.exec(location.hash)?.[1] ?? "modules";
  const page = pages[name] ?? modulesPage;
  leavePage();
  leavePage = () => {};
  nav.hidden = false;
  signOut.hidden = false;
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.page === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${nav.querySelector(`[data-page="${name}"]`)?.textContent ?? "Modules"} · Tackle console`;
  main.replaceChildren();
  const leave = page(main);
  if (typeof leave === "function") leavePage = leave;
}

/** Shows the page the address names, and follows the navigation from then on (once signed in, by either way). */
function startRouting() {
  window.removeEventListener("hashchange", route);
  window.addEventListener("hashchange", route);
  route();
}

async function boot() {
  const login = /^#login=([\w-]+)$/.exec(location.hash)?.[1];
  if (login !== undefined) {
    // The code leaves the address bar at once, whether or not it works.
    history.replaceState(null, "", "/#/modules");
    if (!(await signIn({ code: login }))) {
      showSignIn("This sign-in URL was already used or is not valid. Paste the console token instead.");
      return;
    }
  }
  try {
    await api("/api/session");
  } catch {
    showSignIn();
    return;
  }
  startRouting();
}

// ---------------------------------------------------------------------------------------------------
// Modules and tools

let events;
let modules = [];
/** What is wrong with the source itself (the broker down): shown once, above the table. */
let sourceErrors = [];
const moduleListeners = new Set();

function startEvents() {
  if (events !== undefined) return;
  events = new EventSource("/api/events");
  events.addEventListener("modules", (event) => {
    ({ modules, errors: sourceErrors = [] } = JSON.parse(event.data));
    for (const listener of moduleListeners) listener(modules);
  });
  events.addEventListener("error", () => {
    for (const listener of moduleListeners)
      listener(modules, "The live status stream dropped; reconnecting…");
  });
}

function stopEvents() {
  events?.close();
  events = undefined;
}

function statusBadge(status) {
  return h("span", { class: `badge status-${status}` }, status);
}

function modulesPage(root) {
  startEvents();
  const statusTable = h("tbody");
  const streamNote = h("p", { class: "muted", role: "status" });
  const sourceNote = h("div", { id: "source-errors", role: "alert" });
  const toolsRoot = h("div", { class: "tools" });
  const history = h("div", { id: "history" });
  let shownTools = "";

  root.append(
    h("h1", {}, "Modules and tools"),
    h(
      "section",
      { "aria-labelledby": "modules-heading" },
      h("h2", { id: "modules-heading" }, "Modules"),
      streamNote,
      sourceNote,
      h(
        "table",
        { id: "modules" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", {}, "Module"),
            h("th", {}, "Status"),
            h("th", {}, "Node"),
            h("th", {}, "Tools"),
            h("th", {}, "Errors"),
          ),
        ),
        statusTable,
      ),
    ),
    h(
      "section",
      { "aria-labelledby": "tools-heading" },
      h("h2", { id: "tools-heading" }, "Tools"),
      toolsRoot,
    ),
    h(
      "section",
      { "aria-labelledby": "history-heading" },
      h("h2", { id: "history-heading" }, "Calls in this browser session"),
      history,
    ),
  );

  const render = (list, problem) => {
    streamNote.textContent = problem ?? "Live: status updates without a reload.";
    sourceNote.replaceChildren(
      ...sourceErrors.map((error) => h("p", { class: "errors" }, `${error.source}: ${error.message}`)),
    );
    statusTable.replaceChildren(
      ...list.map((info) =>
        h(
          "tr",
          { "data-module": info.module },
          h("th", { scope: "row" }, info.module),
          h("td", {}, statusBadge(info.status)),
          h("td", {}, info.node ?? "this process"),
          h("td", {}, String(info.tools.length)),
          h(
            "td",
            { class: "errors" },
            info.errors.map((error) => h("div", {}, `${error.source}: ${error.message}`)),
          ),
        ),
      ),
    );
    const signature = JSON.stringify(list.map((info) => [info.module, info.tools]));
    if (signature === shownTools) return;
    const first = shownTools === "";
    shownTools = signature;
    toolsRoot.replaceChildren(
      ...list.flatMap((info) =>
        info.tools.map((tool) =>
          toolPanel(`${info.module}.${tool.name}`, tool, () => renderHistory(history)),
        ),
      ),
    );
    // For the first-load benchmark: when the modules and their tools were first on screen (a tool's
    // form is built when its panel is opened).
    if (first) performance.mark("tackle:modules-rendered");
  };
  moduleListeners.add(render);
  if (modules.length > 0) render(modules);
  else
    api("/api/modules")
      .then((answer) => {
        sourceErrors = answer.errors ?? [];
        render(answer.modules);
      })
      .catch(() => {});
  renderHistory(history);
  return () => moduleListeners.delete(render);
}

/**
 * A tool's panel: its name and description; its form is built from the schema when the panel is first
 * opened (a closed panel shows none, and the first load does not build dozens of forms nobody opened).
 */
function toolPanel(qualified, tool, onCalled) {
  const element = h(
    "details",
    { class: "tool card", "data-tool": qualified },
    h("summary", {}, h("code", {}, qualified), " ", h("span", { class: "muted" }, tool.description)),
  );
  element.addEventListener("toggle", () => {
    if (!element.open || element.dataset.built !== undefined) return;
    element.dataset.built = "";
    element.append(...toolForm(qualified, tool, onCalled));
  });
  return element;
}

function toolForm(qualified, tool, onCalled) {
  const id = qualified.replace(/[^\w-]/g, "-");
  const form = buildForm(tool.inputSchema ?? { type: "object" }, id);
  const result = h("div", { class: "result", "aria-live": "polite" });
  const button = h("button", { type: "submit" }, "Call");
  return [
    h(
      "form",
      {
        novalidate: true,
        onsubmit: async (event) => {
          event.preventDefault();
          form.clearErrors();
          let args;
          try {
            args = form.read() ?? {};
          } catch (error) {
            result.replaceChildren(h("p", { class: "error" }, error.message));
            return;
          }
          button.disabled = true;
          result.replaceChildren(h("p", { class: "muted" }, "Calling…"));
          try {
            // What the person waited for is the round trip; the tool's own time is said beside it.
            const sent = performance.now();
            const answer = await callTool(qualified, args);
            const roundTrip = Math.round((performance.now() - sent) * 10) / 10;
            const timing = `${roundTrip} ms round trip (the tool took ${answer.ms} ms)`;
            addHistory({ tool: qualified, args, ok: answer.ok, ms: roundTrip, at: new Date().toISOString() });
            if (answer.ok) {
              result.replaceChildren(
                h("p", { class: "ok" }, `Result in ${timing}`),
                h("pre", { class: "data", "data-result": "ok" }, json(answer.output)),
              );
            } else {
              const unplaced =
                answer.error.code === "invalid_input" ? form.showIssues(answer.error.data?.issues ?? []) : [];
              result.replaceChildren(
                h("p", { class: "error" }, `Error ${answer.error.code} in ${timing}`),
                ...unplaced.map((issue) =>
                  h("p", { class: "error" }, `${issue.path.join(".") || "(input)"}: ${issue.message}`),
                ),
                h("pre", { class: "data", "data-result": "error" }, json(answer.error)),
              );
            }
            onCalled();
          } catch (error) {
            result.replaceChildren(h("p", { class: "error" }, error.message));
          } finally {
            button.disabled = false;
          }
        },
      },
      form.element,
      button,
    ),
    result,
  ];
}

/**
 * A form for a JSON Schema: objects as fieldsets, arrays as lists with add/remove, enums as selects,
 * booleans as checkboxes, numbers and strings as inputs (defaults filled in, or the given values);
 * anything else as JSON. read() returns the value (undefined when left empty); showIssues() puts the
 * tool's own validation messages beside their fields and returns those it could not place. `drawn` is
 * false when the whole schema fell back to one JSON field.
 */
function buildForm(schema, id, values) {
  const fields = new Map();
  const root = field(withValues(schema, values), [], id, "Arguments", true, true);
  return {
    element: root.element,
    drawn: root.drawn !== false,
    read: () => root.read(),
    clearErrors() {
      for (const entry of fields.values()) entry.setError("");
    },
    showIssues(issues) {
      const unplaced = [];
      for (const issue of issues) {
        let path = issue.path.map(String);
        let target = fields.get(path.join("."));
        while (target === undefined && path.length > 0) {
          path = path.slice(0, -1);
          target = fields.get(path.join("."));
        }
        if (target === undefined || path.length === 0) unplaced.push(issue);
        else target.setError(issue.message);
      }
      return unplaced;
    },
  };

  function field(schema, path, baseId, label, required, isRoot = false, isItem = false) {
    const key = path.join(".");
    const fieldId = `${baseId}-${path.join("-") || "root"}`;
    const errorId = `${fieldId}-error`;
    const error = h("span", { class: "field-error", id: errorId, "aria-live": "polite" });
    const setError = (message) => {
      error.textContent = message;
    };
    const description = schema.description ? h("span", { class: "hint" }, schema.description) : undefined;
    const labelText = [label, required && !isRoot && !isItem ? " *" : ""].join("");
    const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
    let built;
    if (type === "object" && schema.properties !== undefined) {
      const required = new Set(schema.required ?? []);
      const children = Object.entries(schema.properties).map(([name, child]) => [
        name,
        field(child, [...path, name], baseId, name, required.has(name)),
      ]);
      const element = h(
        "fieldset",
        { class: isRoot ? "root" : "nested" },
        isRoot ? undefined : h("legend", {}, labelText),
        description,
        children.map(([, child]) => child.element),
        error,
      );
      built = {
        element,
        read() {
          const value = {};
          for (const [name, child] of children) {
            const item = child.read();
            if (item !== undefined) value[name] = item;
          }
          return Object.keys(value).length === 0 && !isRoot && !required ? undefined : value;
        },
      };
    } else if (type === "array" && schema.items !== undefined && typeof schema.items === "object") {
      const list = h("ol", { class: "array" });
      const items = [];
      const add = (initial) => {
        const index = items.length;
        const child = field(
          withValues(schema.items, initial),
          [...path, String(index)],
          baseId,
          `${label} ${index + 1}`,
          true,
          false,
          true,
        );
        const row = h("li", {}, child.element);
        const remove = h(
          "button",
          {
            type: "button",
            class: "link",
            "aria-label": `Remove ${label} ${index + 1}`,
            onclick: () => {
              const at = items.indexOf(entry);
              items.splice(at, 1);
              row.remove();
            },
          },
          "Remove",
        );
        row.append(remove);
        const entry = { child, row };
        items.push(entry);
        list.append(row);
      };
      for (const initial of Array.isArray(schema.default) ? schema.default : []) add(initial);
      const element = h(
        "fieldset",
        { class: "nested" },
        h("legend", {}, labelText),
        description,
        list,
        h(
          "button",
          { type: "button", class: "secondary", onclick: () => add(), "aria-label": `Add ${label}` },
          `Add ${label}`,
        ),
        error,
      );
      built = {
        element,
        read() {
          const values = items.map((entry) => entry.child.read());
          if (values.length === 0 && !required) return undefined;
          return values.map((value) => value ?? null);
        },
      };
    } else if (Array.isArray(schema.enum)) {
      const select = h(
        "select",
        { id: fieldId, "aria-describedby": errorId },
        required ? undefined : h("option", { value: "" }, "(none)"),
        schema.enum.map((option) =>
          h("option", { value: JSON.stringify(option), selected: schema.default === option }, String(option)),
        ),
      );
      built = {
        element: h(
          "div",
          { class: "field" },
          h("label", { for: fieldId }, labelText),
          select,
          description,
          error,
        ),
        read: () => (select.value === "" ? undefined : JSON.parse(select.value)),
      };
    } else if (type === "boolean") {
      const box = h("input", {
        id: fieldId,
        type: "checkbox",
        checked: schema.default === true,
        "aria-describedby": errorId,
      });
      let touched = false;
      box.addEventListener("change", () => {
        touched = true;
      });
      built = {
        element: h(
          "div",
          { class: "field check" },
          box,
          h("label", { for: fieldId }, labelText),
          description,
          error,
        ),
        read: () => (touched || required || schema.default !== undefined ? box.checked : undefined),
      };
    } else if (type === "number" || type === "integer") {
      const input = h("input", {
        id: fieldId,
        type: "number",
        step: type === "integer" ? "1" : "any",
        value: schema.default,
        "aria-describedby": errorId,
      });
      built = {
        element: h(
          "div",
          { class: "field" },
          h("label", { for: fieldId }, labelText),
          input,
          description,
          error,
        ),
        read: () => (input.value === "" ? undefined : Number(input.value)),
      };
    } else if (type === "string") {
      const long = (schema.maxLength ?? 0) > 2000 || /script|text|content/i.test(label);
      const input = long
        ? h("textarea", { id: fieldId, rows: 3, "aria-describedby": errorId }, schema.default ?? "")
        : h("input", { id: fieldId, type: "text", value: schema.default, "aria-describedby": errorId });
      built = {
        element: h(
          "div",
          { class: "field" },
          h("label", { for: fieldId }, labelText),
          input,
          description,
          error,
        ),
        read: () => (input.value === "" && !required ? undefined : input.value),
      };
    } else {
      // anyOf, free-form objects, unknown types: JSON text, parsed on read.
      const input = h(
        "textarea",
        {
          id: fieldId,
          rows: isRoot ? 6 : 2,
          class: "mono",
          "aria-describedby": errorId,
          placeholder: "JSON",
        },
        schema.default === undefined ? "" : isRoot ? json(schema.default) : JSON.stringify(schema.default),
      );
      built = {
        drawn: !isRoot,
        element: h(
          "div",
          { class: "field" },
          h("label", { for: fieldId }, `${labelText} (JSON)`),
          input,
          description,
          error,
        ),
        read() {
          if (input.value.trim() === "") return undefined;
          try {
            return JSON.parse(input.value);
          } catch {
            setError("Not valid JSON");
            throw new Error(`${key || "arguments"}: not valid JSON`);
          }
        },
      };
    }
    const entry = { ...built, setError };
    fields.set(key, entry);
    return entry;
  }
}

/**
 * The schema with `value` as the defaults of its fields (an object's properties one by one, an array's
 * items), so a form opens filled in with it. Redacted values are not filled in: the person never saw them.
 */
function withValues(schema, value) {
  if (value === undefined || value === "[redacted]" || typeof schema !== "object" || schema === null)
    return schema;
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if (type === "object" && schema.properties !== undefined) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return schema;
    return {
      ...schema,
      properties: Object.fromEntries(
        Object.entries(schema.properties).map(([name, child]) => [name, withValues(child, value[name])]),
      ),
    };
  }
  return { ...schema, default: withoutRedacted(value) };
}

/** A value without its redacted parts (an object's redacted entries, an array's redacted items). */
function withoutRedacted(value) {
  if (Array.isArray(value)) return value.filter((item) => item !== "[redacted]").map(withoutRedacted);
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, item]) => item !== "[redacted]")
      .map(([name, item]) => [name, withoutRedacted(item)]),
  );
}

/**
 * A JSON Schema validator's messages (`#/items/0/sku: message`, as the durable runner words a refused
 * edit) as issues with a path, the shape the form places beside its fields.
 */
function pointerIssues(messages) {
  return messages.map((text) => {
    const match = /^#(\S*): ([\s\S]*)$/.exec(String(text));
    if (match === null) return { path: [], message: String(text) };
    const path = match[1]
      .split("/")
      .slice(1)
      .map((segment) => decodeURIComponent(segment).replace(/~1/g, "/").replace(/~0/g, "~"));
    // A missing required field is the object's error; it belongs beside the field it names.
    const missing = /required property "([^"]+)"/.exec(match[2]);
    if (missing !== null) return { path: [...path, missing[1]], message: "required" };
    return { path, message: match[2] };
  });
}

function readHistory() {
  try {
    return JSON.parse(sessionStorage.getItem("tackle.calls") ?? "[]");
  } catch {
    return [];
  }
}

function addHistory(entry) {
  const list = [entry, ...readHistory()].slice(0, 50);
  sessionStorage.setItem("tackle.calls", JSON.stringify(list));
}

function renderHistory(root) {
  const list = readHistory();
  if (list.length === 0) {
    root.replaceChildren(h("p", { class: "muted" }, "No calls yet."));
    return;
  }
  root.replaceChildren(
    h(
      "table",
      {},
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "When"),
          h("th", {}, "Tool"),
          h("th", {}, "Arguments"),
          h("th", {}, "Outcome"),
          h("th", {}, "Time"),
        ),
      ),
      h(
        "tbody",
        {},
        list.map((entry) =>
          h(
            "tr",
            {},
            h("td", {}, new Date(entry.at).toLocaleTimeString()),
            h("td", {}, h("code", {}, entry.tool)),
            h("td", {}, h("code", { class: "clip" }, JSON.stringify(entry.args))),
            h("td", {}, statusBadge(entry.ok ? "ok" : "error")),
            h("td", {}, `${entry.ms} ms`),
          ),
        ),
      ),
    ),
  );
}

// ---------------------------------------------------------------------------------------------------
// Durable runs

function runsPage(root) {
  const list = h("tbody");
  const detail = h("section", { id: "run", "aria-labelledby": "run-heading" });
  const notice = h("p", { class: "error", role: "alert" });
  let selected;
  let stream;

  const refresh = async () => {
    const { runs } = await api("/api/runs");
    list.replaceChildren(
      ...runs.map((run) =>
        h(
          "tr",
          { "data-thread": run.threadId },
          h(
            "th",
            { scope: "row" },
            h(
              "a",
              {
                href: `#/runs/${run.threadId}`,
                onclick: (event) => {
                  event.preventDefault();
                  select(run.threadId);
                },
              },
              run.threadId,
            ),
          ),
          h("td", {}, run.graph),
          h("td", {}, run.orderId),
          h("td", {}, statusBadge(run.status)),
          h("td", {}, run.state?.outcome ?? ""),
        ),
      ),
    );
    if (runs.length === 0)
      list.replaceChildren(
        h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No runs yet: start the demo agent.")),
      );
  };

  const select = (threadId, graph = "demo-refund") => {
    selected = threadId;
    stream?.close();
    const cards = new Map();
    let lastEventId = "";
    const cardsRoot = h("div", { class: "cards" });
    const approvals = h("div", { class: "approvals" });
    const runStatus = h("p", { class: "run-status", role: "status" }, "Connecting…");
    detail.replaceChildren(
      h("h2", { id: "run-heading" }, `Run ${threadId}`),
      runStatus,
      approvals,
      h("h3", {}, "Tool calls"),
      cardsRoot,
    );

    const card = (toolCallId) => {
      let entry = cards.get(toolCallId);
      if (entry === undefined) {
        const status = h("span", { class: "badge" });
        const name = h("code");
        const args = h("pre", { class: "data" });
        const result = h("div");
        entry = {
          element: h(
            "article",
            { class: "card tool-card", "data-call": toolCallId },
            h("header", {}, name, " ", status),
            h("h4", {}, "Arguments"),
            args,
            result,
          ),
          status,
          name,
          args,
          result,
        };
        cards.set(toolCallId, entry);
        cardsRoot.append(entry.element);
      }
      return entry;
    };
    const setStatus = (entry, status) => {
      entry.status.className = `badge status-${status}`;
      entry.status.textContent = status;
      entry.element.dataset.status = status;
    };

    // One handler for the AG-UI events, whether they come from the thread's stream or from a resume's answer.
    const handlers = {
      RUN_STARTED: () => {
        runStatus.textContent = "Running";
        approvals.replaceChildren();
      },
      TOOL_CALL_START: (event) => {
        const entry = card(event.toolCallId);
        entry.name.textContent = event.toolCallName;
        setStatus(entry, "running");
      },
      TOOL_CALL_ARGS: (event) => {
        showData(card(event.toolCallId).args, JSON.parse(event.delta));
      },
      TOOL_CALL_RESULT: (event) => {
        const entry = card(event.toolCallId);
        const content = JSON.parse(event.content);
        const object = content !== null && typeof content === "object" ? content : {};
        const failed = "error" in object && Object.keys(object).length === 1;
        const declined = object.declined === true;
        const cancelled = object.cancelled === true;
        setStatus(entry, failed ? "error" : declined ? "declined" : cancelled ? "cancelled" : "completed");
        const data = h("pre", { class: "data" });
        showData(data, failed ? content.error : content);
        entry.result.replaceChildren(h("h4", {}, failed ? "Error" : "Result"), data);
      },
      MESSAGES_SNAPSHOT: (event) => {
        // Arguments a person edited before approving: the conversation is restated with them.
        for (const message of event.messages) {
          for (const call of message.toolCalls ?? []) {
            if (cards.has(call.id)) showData(cards.get(call.id).args, JSON.parse(call.function.arguments));
          }
        }
      },
      RUN_FINISHED: (event) => {
        if (event.outcome?.type === "interrupt") {
          runStatus.textContent = "Paused: waiting for a person";
          approvals.replaceChildren(
            ...event.outcome.interrupts.map((interrupt) => approvalCard(interrupt, resume)),
          );
        } else if (event.outcome?.type === "cancelled") {
          runStatus.textContent = "Cancelled";
        } else {
          runStatus.textContent = `Completed: ${json(event.result?.outcome ?? "done")}`;
          runStatus.dataset.state = "completed";
        }
        refresh().catch(() => {});
      },
      RUN_ERROR: (event) => {
        runStatus.textContent = `Failed: ${event.message}`;
        refresh().catch(() => {});
      },
    };
    const dispatch = (type, id, data) => {
      if (id) lastEventId = id;
      handlers[type]?.(JSON.parse(data));
    };

    // The thread's AG-UI events (every run of it, in order), from the event after the last one seen.
    const connect = () => {
      const after = lastEventId === "" ? "" : `?after=${encodeURIComponent(lastEventId)}`;
      stream = new EventSource(`/api/durable/ag-ui/threads/${encodeURIComponent(threadId)}/events${after}`);
      for (const type of Object.keys(handlers)) {
        stream.addEventListener(type, (event) => {
          dispatch(type, event.lastEventId, event.data);
          if (type === "RUN_FINISHED" || type === "RUN_ERROR") stream.close();
        });
      }
    };

    // An answer is an AG-UI resume: a RunAgentInput whose answer is the SSE stream of the run it resumes.
    const resume = async (entry) => {
      stream?.close();
      const cardsShown = [...approvals.children];
      approvals.replaceChildren(h("p", { class: "muted" }, "Answer sent; the run goes on…"));
      const response = await fetch(`/api/durable/ag-ui/${encodeURIComponent(graph)}`, {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify({
          threadId,
          runId: `console-${crypto.randomUUID()}`,
          state: {},
          messages: [],
          tools: [],
          context: [],
          forwardedProps: {},
          resume: [entry],
        }),
      });
      if (!response.ok) {
        // Refused (an edit the tool's schema rejects, say): the run is still paused, its card stays.
        approvals.replaceChildren(...cardsShown);
        const body = await response.json().catch(() => ({}));
        throw new ApiError(response.status, body);
      }
      await readSse(response.body, dispatch);
    };
    // Cancelling ends the run itself (the durable runner's cancel); the thread's stream then tells it.
    resume.cancel = async (reason) => {
      await api(`/api/durable/runs/${encodeURIComponent(threadId)}/cancel`, {
        method: "POST",
        body: { reason },
      });
      approvals.replaceChildren();
      connect();
    };
    connect();
  };

  root.append(
    h("h1", {}, "Durable runs"),
    h(
      "p",
      {},
      "The demo agent follows a scripted model (no hosted LLM): it looks an order up, then asks you to approve a refund. The card number is redacted everywhere you see it.",
    ),
    h(
      "button",
      {
        type: "button",
        id: "start-demo",
        onclick: async () => {
          notice.textContent = "";
          try {
            const { threadId } = await api("/api/runs", { method: "POST", body: {} });
            await refresh();
            select(threadId);
          } catch (error) {
            notice.textContent = error.message;
          }
        },
      },
      "Start the demo agent",
    ),
    notice,
    h("h2", {}, "Threads"),
    h(
      "table",
      { id: "runs" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "Thread"),
          h("th", {}, "Graph"),
          h("th", {}, "Order"),
          h("th", {}, "Status"),
          h("th", {}, "Outcome"),
        ),
      ),
      list,
    ),
    detail,
  );
  refresh().catch((error) => {
    notice.textContent = error.message;
  });
  const timer = setInterval(() => refresh().catch(() => {}), 3000);
  return () => {
    clearInterval(timer);
    stream?.close();
    void selected;
  };
}

/** Reads a `text/event-stream` body, calling `onEvent(type, id, data)` for each event. */
async function readSse(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = "message";
      let id = "";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length > 0) onEvent(type, id, data.join("\n"));
      end = buffer.indexOf("\n\n");
    }
  }
}

/** Data with redacted values marked as such. */
function showData(element, value) {
  element.replaceChildren();
  const text = json(value);
  const parts = text.split('"[redacted]"');
  parts.forEach((part, index) => {
    element.append(part);
    if (index < parts.length - 1)
      element.append(h("span", { class: "redacted", title: "redacted by policy" }, "redacted"));
  });
}

/**
 * An approval's card: the arguments as shown (redacted ones marked), approve, cancel, reject with a
 * reason, or edit the arguments in a form drawn from the pending tool's input JSON Schema (filled in with
 * the proposed arguments) and approve those. A refused edit puts the schema's messages beside the fields.
 * Without a schema the form can draw, the arguments are edited as JSON text.
 */
function approvalCard(interrupt, resume) {
  const request = interrupt.metadata?.request ?? {};
  const params = request.params ?? {};
  const baseId = `edit-${String(interrupt.id).replace(/[^\w-]/g, "-")}`;
  const reasonId = `reason-${String(interrupt.id).replace(/[^\w-]/g, "-")}`;
  const reason = h("input", { id: reasonId, type: "text" });
  const form = buildForm(request.inputSchema ?? { type: "object" }, baseId, params);
  const message = h("p", { class: "error", role: "alert" });
  const argsView = h("pre", { class: "data" });
  showData(argsView, params);
  const cancel = async () => {
    try {
      await resume.cancel("cancelled from the console");
    } catch (error) {
      message.textContent = error.message;
    }
  };
  const answer = async (status, payload) => {
    message.textContent = "";
    form.clearErrors();
    try {
      await resume({ interruptId: interrupt.id, status, ...(payload === undefined ? {} : { payload }) });
    } catch (error) {
      const refused = error.body?.error;
      if (refused?.code === "invalid_edit" && Array.isArray(refused.data?.errors) && form.drawn) {
        // The schema's own messages, beside the fields they name; the rest under the card.
        const unplaced = form.showIssues(pointerIssues(refused.data.errors));
        // Each issue once, in the schema's words; never the interrupt's internal id.
        message.replaceChildren(
          "The edited arguments were refused by the tool's input schema",
          unplaced.length < refused.data.errors.length ? " (see beside the fields)." : ":",
          ...unplaced.map((issue) =>
            h("span", { class: "issue" }, ` ${issue.path.join(".") || "(arguments)"}: ${issue.message}`),
          ),
        );
      } else {
        message.textContent = error.message;
      }
    }
  };
  return h(
    "article",
    { class: "card approval", "data-interrupt": interrupt.id },
    h("h3", {}, request.title ?? "Approval"),
    request.description ? h("p", {}, request.description) : undefined,
    h("p", {}, "Tool ", h("code", {}, request.toolName ?? "?"), " will run with:"),
    argsView,
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        { type: "button", class: "approve", onclick: () => answer("resolved", { approved: true }) },
        "Approve",
      ),
      h(
        "button",
        {
          type: "button",
          class: "secondary cancel",
          onclick: () => cancel(),
        },
        "Cancel run",
      ),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: reasonId }, "Reason for rejecting"),
      reason,
      h(
        "button",
        {
          type: "button",
          class: "danger reject",
          onclick: () => answer("resolved", { approved: false, reason: reason.value || "rejected" }),
        },
        "Reject",
      ),
    ),
    h(
      "form",
      {
        class: "edit-args",
        novalidate: true,
        "aria-label": "Edit the arguments",
        "data-form": form.drawn ? "schema" : "json",
        onsubmit: (event) => {
          event.preventDefault();
          message.textContent = "";
          form.clearErrors();
          let edited;
          try {
            edited = form.read() ?? {};
          } catch (error) {
            message.textContent = `The edited arguments are not valid JSON (${error.message})`;
            return;
          }
          void answer("resolved", { approved: true, editedArgs: edited });
        },
      },
      h(
        "h4",
        {},
        form.drawn
          ? "Edit the arguments (redacted ones stay as they are)"
          : "Edit the arguments as JSON (redacted ones stay as they are)",
      ),
      form.element,
      h("button", { type: "submit", class: "secondary edit-approve" }, "Approve with these arguments"),
    ),
    message,
  );
}

// ---------------------------------------------------------------------------------------------------
// Memory

function memoryPage(root) {
  const results = h("div", { id: "memories", "aria-live": "polite" });
  const detail = h("section", { id: "memory-detail" });
  const notice = h("p", { class: "error", role: "alert" });
  const scopeFields = ["userId", "agentId", "sessionId"];
  const input = (id, label, attributes = {}) => {
    const element = h("input", { id, type: "text", ...attributes });
    return [h("div", { class: "field" }, h("label", { for: id }, label), element), element];
  };
  const [queryField, query] = input("memory-query", "Search for", { required: true });
  const scope = scopeFields.map((name) => input(`memory-${name}`, `Scope: ${name}`));
  const [contentField, content] = input("memory-content", "Remember this");

  const currentScope = () =>
    Object.fromEntries(
      scope
        .map(([, element], index) => [scopeFields[index], element.value.trim()])
        .filter(([, value]) => value !== ""),
    );

  const search = async () => {
    notice.textContent = "";
    if (query.value.trim() === "") {
      notice.textContent = "Type something to search for.";
      return;
    }
    try {
      // No scope field filled in: the whole tenant, asked for in so many words (the service reads
      // every scope only when told to).
      const named = currentScope();
      const found = await callOrThrow("memory.memory_search", {
        ...(Object.keys(named).length === 0 ? { wholeTenant: true } : named),
        query: query.value.trim(),
        limit: 20,
      });
      // A hit is { id, text, kind, date, score } (older services answered { memory, score }).
      found.results = found.results.map((hit) =>
        hit.memory === undefined
          ? hit
          : { id: hit.memory.id, text: hit.memory.content, kind: hit.memory.kind, score: hit.score },
      );
      if (found.results.length === 0) {
        results.replaceChildren(h("p", { class: "muted" }, "Nothing found in this scope."));
        return;
      }
      results.replaceChildren(
        h(
          "ul",
          { class: "memories" },
          found.results.map((hit) =>
            h(
              "li",
              { "data-memory": hit.id },
              h("button", { type: "button", class: "link", onclick: () => showMemory(hit.id) }, hit.text),
              " ",
              h(
                "span",
                { class: "muted" },
                `${hit.kind} · ${hit.date ?? ""} · score ${hit.score.toFixed(3)}`,
              ),
            ),
          ),
        ),
      );
    } catch (error) {
      notice.textContent = error.message;
    }
  };

  const showMemory = async (id) => {
    try {
      const [{ memory }, history] = await Promise.all([
        callOrThrow("memory.memory_lifecycle_get", { id }),
        callOrThrow("memory.memory_lifecycle_history", { id }),
      ]);
      const confirmDialog = h(
        "dialog",
        { id: "confirm-delete", "aria-labelledby": "confirm-heading" },
        h("h3", { id: "confirm-heading" }, "Delete this memory?"),
        h("p", {}, "It leaves retrieval; its history remains."),
        h(
          "div",
          { class: "field" },
          h("label", { for: "delete-reason" }, "Reason"),
          h("input", { id: "delete-reason", type: "text", value: "removed from the console" }),
        ),
        h(
          "div",
          { class: "actions" },
          h(
            "button",
            {
              type: "button",
              class: "danger",
              id: "confirm-delete-yes",
              onclick: async () => {
                confirmDialog.close();
                try {
                  await callOrThrow("memory.memory_lifecycle_delete", {
                    id,
                    reason: document.getElementById("delete-reason").value || undefined,
                  });
                  await showMemory(id);
                  await search();
                } catch (error) {
                  notice.textContent = error.message;
                }
              },
            },
            "Delete",
          ),
          h(
            "button",
            { type: "button", class: "secondary", onclick: () => confirmDialog.close() },
            "Keep it",
          ),
        ),
      );
      detail.replaceChildren(
        h("h2", {}, "Memory"),
        h(
          "dl",
          { class: "facts" },
          h("dt", {}, "Content"),
          h("dd", {}, memory.content),
          h("dt", {}, "Kind"),
          h("dd", {}, memory.kind),
          h("dt", {}, "Status"),
          h("dd", {}, statusBadge(memory.status)),
          h("dt", {}, "Version"),
          h("dd", {}, String(memory.version)),
          h("dt", {}, "Scope"),
          h(
            "dd",
            {},
            json(
              Object.fromEntries(
                scopeFields
                  .concat(["tenantId", "appId", "runId"])
                  .filter((name) => memory[name] !== undefined)
                  .map((name) => [name, memory[name]]),
              ),
            ),
          ),
          h("dt", {}, "Provenance"),
          h("dd", {}, h("pre", { class: "data" }, json(memory.provenance))),
        ),
        h("h3", {}, "Versions"),
        h(
          "table",
          { id: "versions" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", {}, "Version"),
              h("th", {}, "Change"),
              h("th", {}, "Content"),
              h("th", {}, "Status"),
              h("th", {}, "Reason"),
              h("th", {}, "At"),
            ),
          ),
          h(
            "tbody",
            {},
            history.versions.map((version) =>
              h(
                "tr",
                {},
                h("td", {}, String(version.version)),
                h("td", {}, version.change),
                h("td", {}, version.content),
                h("td", {}, version.status),
                h("td", {}, version.reason ?? ""),
                h("td", {}, version.at),
              ),
            ),
          ),
        ),
        memory.status === "deleted"
          ? h("p", { class: "muted" }, "Deleted.")
          : h(
              "button",
              {
                type: "button",
                class: "danger",
                id: "delete-memory",
                onclick: () => confirmDialog.showModal(),
              },
              "Delete…",
            ),
        confirmDialog,
      );
    } catch (error) {
      notice.textContent = error.message;
    }
  };

  root.append(
    h("h1", {}, "Memory"),
    h(
      "form",
      {
        class: "card",
        id: "memory-search",
        onsubmit: (event) => {
          event.preventDefault();
          void search();
        },
      },
      queryField,
      h(
        "div",
        { class: "row" },
        scope.map(([field]) => field),
      ),
      h("p", { class: "muted" }, "With every scope field empty, the search reads the whole tenant."),
      h("button", { type: "submit" }, "Search"),
    ),
    h(
      "form",
      {
        class: "card",
        id: "memory-add",
        onsubmit: async (event) => {
          event.preventDefault();
          notice.textContent = "";
          try {
            const added = await callOrThrow("memory.memory_add", {
              ...currentScope(),
              content: content.value,
            });
            content.value = "";
            await showMemory(added.memory?.id ?? added.id);
          } catch (error) {
            notice.textContent = error.message;
          }
        },
      },
      contentField,
      h("button", { type: "submit", class: "secondary" }, "Add a memory in this scope"),
    ),
    notice,
    results,
    detail,
  );
}

// ---------------------------------------------------------------------------------------------------
// Documents

const sampleScript = `const track = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'caption');
const caption = entities.create({ entityKind: 'caption', payload: { text: 'Welcome!' } });
const clip = entities.create({ entityKind: 'clip' });
const marker = entities.create({ entityKind: 'sequence-marker', payload: { startMs: 3000, durationMs: 2000 } });
relations.link({ relationKind: 'marker', endpoint0EntityId: clip.entityId, endpoint1EntityId: marker.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: clip.entityId, endpoint1EntityId: caption.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: track.entityId, endpoint1EntityId: clip.entityId });`;

function documentsPage(root) {
  const docId = h("input", { id: "doc-id", type: "text", value: "sample-timeline", required: true });
  const drawing = h("div", { id: "timeline", class: "card" });
  const log = h("ol", { id: "change-log", class: "change-log" });
  const logNote = h("p", { class: "muted", role: "status" });
  const older = h(
    "button",
    { type: "button", class: "secondary", id: "older-changes", hidden: true },
    "Older changes",
  );
  const script = h("textarea", { id: "edit-script", rows: 9, class: "mono" }, sampleScript);
  const preview = h("div", { id: "preview", "aria-live": "polite" });
  const notice = h("p", { class: "error", role: "alert" });
  const commit = h("button", { type: "button", id: "commit-plan", disabled: true }, "Commit");
  let plan;

  // The document's own change log, as the document server keeps it (docscript.changes), newest first.
  let shownSeq;
  let olderCursor;
  const renderLog = (page, append) => {
    const items = page.changes.map(changeItem);
    if (append) log.append(...items);
    else
      log.replaceChildren(
        ...(items.length === 0
          ? [h("li", { class: "muted" }, "No changes stored for this document yet.")]
          : items),
      );
    olderCursor = page.next_cursor;
    older.hidden = olderCursor === undefined;
  };
  // The document the page shows: the field may be edited meanwhile, until Open is pressed.
  let openedId = docId.value.trim();
  const readLog = () => callOrThrow("docscript.changes", { doc_id: openedId, limit: 20 });
  older.addEventListener("click", async () => {
    if (olderCursor === undefined) return;
    try {
      renderLog(
        await callOrThrow("docscript.changes", {
          doc_id: openedId,
          limit: 20,
          cursor: olderCursor,
        }),
        true,
      );
    } catch (error) {
      logNote.textContent = error.message;
    }
  });

  const open = async () => {
    notice.textContent = "";
    const id = docId.value.trim();
    try {
      const snapshot = await readDocument(id);
      if (id !== openedId) {
        openedId = id;
        shownSeq = undefined;
      }
      drawing.replaceChildren(
        drawTimeline(snapshot),
        h(
          "p",
          { class: "muted" },
          `Version ${snapshot.version.slice(0, 24)} · ${snapshot.total.entities} entities, ${snapshot.total.relations} relations${snapshot.partial ? ` (first ${snapshot.entities.length} drawn)` : ""}`,
        ),
      );
      drawing.dataset.version = snapshot.version;
    } catch (error) {
      notice.textContent = error.message;
      return;
    }
    // The log apart: a drawing stays drawn when the log cannot be read (a module without docscript.changes).
    try {
      const page = await readLog();
      shownSeq = page.changes[0]?.seq ?? 0;
      renderLog(page, false);
      logNote.textContent = "From the document server, newest first; checked every 3 s.";
    } catch (error) {
      logNote.textContent = `The change log could not be read: ${error.message}`;
    }
  };

  const run = async () => {
    notice.textContent = "";
    commit.disabled = true;
    // What the last run or commit said is not this run's answer: it goes before this one is asked.
    plan = undefined;
    preview.replaceChildren(h("p", { class: "muted" }, "Running the script…"));
    try {
      const answer = await callOrThrow("docscript.edit", {
        op: "run-edit-script",
        doc_id: docId.value.trim(),
        script: script.value,
      });
      plan = answer;
      const counts = answer.preview.counts;
      preview.replaceChildren(
        h("h3", {}, "Preview"),
        h(
          "p",
          { "data-preview": "counts" },
          Object.entries(counts)
            .map(([name, count]) => `${count} ${name}`)
            .join(", "),
        ),
        h("pre", { class: "data" }, json(answer.preview.changes ?? answer.preview)),
        answer.logs?.length > 0 ? h("pre", { class: "data" }, json(answer.logs)) : undefined,
      );
      commit.disabled = false;
    } catch (error) {
      preview.replaceChildren(
        h("h3", {}, "The script failed"),
        h("p", { class: "error", "data-preview": "error" }, error.message),
      );
    }
  };

  commit.addEventListener("click", async () => {
    if (plan === undefined) return;
    commit.disabled = true;
    try {
      const outcome = await callOrThrow("docscript.edit", {
        op: "commit-plan",
        doc_id: plan.doc_id,
        plan_id: plan.plan_id,
      });
      if (outcome.status !== "committed") {
        // Conflicted, rejected or unconfirmed: said as such, with the reasons; the plan stays for a retry.
        preview.replaceChildren(
          h("p", { class: "error" }, `Not committed: ${outcome.status}`),
          h("pre", { class: "data" }, json(outcome)),
        );
        commit.disabled = outcome.status !== "unconfirmed";
        await open();
        return;
      }
      preview.replaceChildren(
        h(
          "p",
          { class: "ok", "data-committed": plan.plan_id },
          `Committed plan ${plan.plan_id} (version ${outcome.version.slice(0, 24)})`,
        ),
      );
      plan = undefined;
      await open();
    } catch (error) {
      notice.textContent = error.message;
    }
  });

  root.append(
    h("h1", {}, "Documents"),
    h(
      "form",
      {
        class: "row card",
        onsubmit: (event) => {
          event.preventDefault();
          void open();
        },
      },
      h("div", { class: "field" }, h("label", { for: "doc-id" }, "Document"), docId),
      h("button", { type: "submit" }, "Open"),
    ),
    notice,
    drawing,
    h(
      "section",
      { class: "card", "aria-labelledby": "script-heading" },
      h("h2", { id: "script-heading" }, "Edit script"),
      h(
        "label",
        { for: "edit-script" },
        "Script (runs in the sandbox on the current document; nothing is published until you commit)",
      ),
      script,
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", id: "run-script", class: "secondary", onclick: run }, "Preview"),
        commit,
      ),
      preview,
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "log-heading" },
      h("h2", { id: "log-heading" }, "Change log"),
      logNote,
      log,
      older,
    ),
  );
  void open();
  // Another client's change (an agent, a script, another console) redraws the page: the log's newest
  // entry is checked every 3 s, and the drawing and the log are read again when it moved.
  let checking = false;
  const timer = setInterval(async () => {
    if (checking || shownSeq === undefined) return;
    checking = true;
    try {
      const page = await readLog();
      if ((page.changes[0]?.seq ?? 0) !== shownSeq) await open();
    } catch {
      // The next tick tries again; open() says what is wrong when the person asks.
    } finally {
      checking = false;
    }
  }, 3000);
  return () => clearInterval(timer);
}

/** One change log entry: seq, time, who, what it changed, and the plan it committed. */
function changeItem(change) {
  const counts = (noun, plural, { created, changed, deleted }) => {
    const parts = [
      created > 0 ? `${created} created` : undefined,
      changed > 0 ? `${changed} changed` : undefined,
      deleted > 0 ? `${deleted} deleted` : undefined,
    ].filter(Boolean);
    if (parts.length === 0) return undefined;
    return `${created + changed + deleted === 1 ? noun : plural}: ${parts.join(", ")}`;
  };
  const summary =
    [counts("entity", "entities", change.entities), counts("relation", "relations", change.relations)]
      .filter(Boolean)
      .join("; ") || "no entity or relation changed";
  const who = change.actor ?? `peer ${change.peers.join(", ")}`;
  return h(
    "li",
    { "data-seq": change.seq },
    h("span", { class: "seq" }, `#${change.seq}`),
    " ",
    h("time", { datetime: change.at }, new Date(change.at).toLocaleTimeString()),
    ` · ${who} (${change.credential === "host" ? "host credential" : "document token"}) · ${summary}`,
    change.status === "conflicted" ? " · stored past a conflict" : undefined,
    ...change.planIds.map((planId) => [" · plan ", h("code", { "data-plan": planId }, planId)]),
  );
}

/** Every page of a document's snapshot (the tool answers in token-budgeted pages with a cursor). */
async function readDocument(docId) {
  const entities = [];
  const relations = [];
  let page = await callOrThrow("docscript.edit", { op: "snapshot", doc_id: docId });
  const first = page;
  entities.push(...page.entities);
  relations.push(...page.relations);
  for (let pages = 1; page.next_cursor !== undefined && pages < 50; pages++) {
    page = await callOrThrow("docscript.edit", { op: "snapshot", doc_id: docId, cursor: page.next_cursor });
    entities.push(...page.entities);
    relations.push(...page.relations);
  }
  return {
    version: first.version,
    total: first.total,
    entities,
    relations,
    partial: page.next_cursor !== undefined || first.truncated === true,
  };
}

/** Tracks as lanes, clips as blocks on a time axis, captions under their blocks, markers as ticks. */
function drawTimeline(snapshot) {
  const byId = new Map(snapshot.entities.map((entity) => [entity.entityId, entity]));
  const contains = (parentId) =>
    snapshot.relations
      .filter((relation) => relation.relationKind === "contain" && relation.endpoint0EntityId === parentId)
      .map((relation) => byId.get(relation.endpoint1EntityId))
      .filter(Boolean);
  const markerOf = (clipId) => {
    const relation = snapshot.relations.find(
      (item) => item.relationKind === "marker" && item.endpoint0EntityId === clipId,
    );
    return relation === undefined ? undefined : byId.get(relation.endpoint1EntityId);
  };
  // Lanes in a stable order (a document keeps no order among its tracks, and its snapshot lists them by
  // id): the timeline schema's roles in order, pictures above sound above captions; then by name.
  const roles = ["video", "overlay", "audio", "bgm", "voiceover", "caption"];
  const rank = (track) => {
    const at = roles.indexOf(track.payload?.role);
    return at < 0 ? roles.length : at;
  };
  const tracks = snapshot.entities
    .filter((entity) => entity.entityKind === "track")
    .sort(
      (a, b) =>
        rank(a) - rank(b) ||
        String(a.payload?.name ?? "").localeCompare(String(b.payload?.name ?? "")) ||
        a.entityId.localeCompare(b.entityId),
    );
  const lanes = tracks.map((track) => ({
    track,
    clips: contains(track.entityId)
      .filter((entity) => entity.entityKind === "clip")
      .map((clip) => {
        const marker = markerOf(clip.entityId);
        const content = contains(clip.entityId)[0];
        const start = Number(marker?.payload?.startMs ?? 0);
        const mediaLength = Number(content?.payload?.durationMs ?? 0);
        const duration = marker?.payload?.durationMs ?? (mediaLength > 0 ? mediaLength : null);
        return { clip, marker, content, start, duration };
      }),
  }));
  const end = Math.max(
    10_000,
    ...lanes.flatMap((lane) => lane.clips.map((clip) => clip.start + (clip.duration ?? 0))),
  );
  const width = 900;
  const labelWidth = 150;
  const captionLine = 14;
  const scale = (width - labelWidth - 20) / end;
  // The drawing is built before it is on screen, so text widths are estimated: 11px text, ≤ 7 units a character.
  const textWidth = (text) => text.length * 7;
  // Each lane's clips in time order; a label only inside a block it fits in (the block's title names it
  // always); a caption under its block, on the first line where it overlaps no earlier caption.
  let top = 24;
  const laid = lanes.map((lane) => {
    const lineEnds = [];
    const clips = [...lane.clips]
      .sort((a, b) => a.start - b.start)
      .map((clip) => {
        const x = labelWidth + clip.start * scale;
        const blockWidth = Math.max(4, (clip.duration ?? end - clip.start) * scale);
        const kind = clip.content?.entityKind ?? "clip";
        const label =
          kind === "caption"
            ? "caption"
            : (clip.content?.payload?.name ?? clip.content?.payload?.key ?? kind);
        let caption;
        let line = 0;
        if (kind === "caption") {
          caption = `“${clip.content.payload?.text ?? ""}”`;
          line = lineEnds.findIndex((right) => right <= x);
          if (line < 0) line = lineEnds.push(0) - 1;
          lineEnds[line] = x + 2 + textWidth(caption) + 6;
        }
        return { ...clip, x, blockWidth, kind, label, caption, line };
      });
    const laneHeight = 56 + Math.max(0, lineEnds.length - 1) * captionLine;
    const y = top;
    top += laneHeight;
    return { lane, clips, y, laneHeight };
  });
  const height = top + 16;
  const svg = h("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width: "100%",
    role: "img",
    "aria-label": `Timeline with ${lanes.length} tracks and ${lanes.reduce((sum, lane) => sum + lane.clips.length, 0)} clips`,
    "data-clips": lanes.reduce((sum, lane) => sum + lane.clips.length, 0),
  });
  const step = end > 30_000 ? 10_000 : 1000;
  for (let at = 0; at <= end; at += step) {
    const x = labelWidth + at * scale;
    svg.append(
      h("line", { x1: x, x2: x, y1: 20, y2: height, class: "tick" }),
      h("text", { x, y: 14, class: "axis", "text-anchor": "middle" }, `${at / 1000}s`),
    );
  }
  for (const { lane, clips, y, laneHeight } of laid) {
    svg.append(
      h(
        "text",
        { x: 8, y: y + 22, class: "lane-label" },
        `${lane.track.payload?.name ?? lane.track.entityId} (${lane.track.payload?.role ?? "track"})`,
      ),
    );
    svg.append(
      h("line", {
        x1: labelWidth,
        x2: width - 10,
        y1: y + laneHeight - 4,
        y2: y + laneHeight - 4,
        class: "lane-line",
      }),
    );
    for (const clip of clips) {
      const { x, blockWidth, kind, label } = clip;
      const group = h(
        "g",
        { class: `clip clip-${kind}`, "data-clip": clip.clip.entityId },
        h(
          "title",
          {},
          `${label}: ${clip.start / 1000}s, ${clip.duration === null ? "to the end" : `${clip.duration / 1000}s`}`,
        ),
        h("rect", { x, y, width: blockWidth, height: 26, rx: 4 }),
        textWidth(label) + 8 <= blockWidth
          ? h("text", { x: x + 4, y: y + 17, class: "clip-label" }, label)
          : undefined,
        h("line", { x1: x, x2: x, y1: y - 2, y2: y + 30, class: "marker" }),
      );
      if (clip.caption !== undefined)
        group.append(
          h("text", { x: x + 2, y: y + 42 + clip.line * captionLine, class: "caption" }, clip.caption),
        );
      svg.append(group);
    }
  }
  return svg;
}

boot();
