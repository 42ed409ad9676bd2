/**
 * The Tackle console's page: no framework, no build step, no network beyond this console. Pages:
 * #/modules, #/runs, #/memory, #/documents; every call goes through this console's /api. This module
 * signs in and routes; each page is a module of its own.
 */
import { api, whenSignedOut } from "./api.ts";
import { documentsPage } from "./documents-page.ts";
import { byId, h } from "./dom.ts";
import { memoryPage } from "./memory-page.ts";
import { modulesPage, stopEvents } from "./modules-page.ts";
import { runsPage } from "./runs-page.ts";

/** A page draws itself into `root` and may return what stops its timers and streams when it is left. */
export type Page = (root: HTMLElement) => (() => void) | undefined;

const main = byId("main");
const nav = byId("nav");
const signOut = byId("sign-out");

const pages: Record<string, Page> = {
  modules: modulesPage,
  runs: runsPage,
  memory: memoryPage,
  documents: documentsPage,
};
let leavePage: () => void = () => {};

function showSignIn(message?: string): void {
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

async function signIn(secret: { token: string } | { code: string }): Promise<boolean> {
  try {
    await api("/api/session", { method: "POST", body: secret });
    return true;
  } catch {
    return false;
  }
}

function route(): void {
  const name = /^#\/(\w+)/.exec(location.hash)?.[1] ?? "modules";
  // Only the pages' own names: `#/constructor` is no page, and shows the modules as any unknown name does.
  const page = Object.hasOwn(pages, name) ? (pages[name] as Page) : modulesPage;
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
function startRouting(): void {
  window.removeEventListener("hashchange", route);
  window.addEventListener("hashchange", route);
  route();
}

async function boot(): Promise<void> {
  whenSignedOut(showSignIn);
  signOut.addEventListener("click", async () => {
    await api("/api/session", { method: "DELETE" }).catch(() => {});
    stopEvents();
    showSignIn("Signed out.");
  });
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

void boot();
