// What every page uses: the app element, formatting, the API with its read
// token, the URL as the state of a page, and a re-render hook the router sets.

export const app = document.getElementById("app");

export const esc = (s) =>
  String(s ?? "").replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c],
  );

// Times, ratios and intervals with three significant digits everywhere: a
// case flagged at 1.04x shows two different times, never "0.28 µs vs 0.28 µs".
export const sig3 = (x) =>
  x.toLocaleString(undefined, { minimumSignificantDigits: 3, maximumSignificantDigits: 3 });

export const us = (ns) => (ns == null ? "–" : sig3(ns / 1000) + " µs");

export const ratioText = (r) => (r == null ? "–" : sig3(r) + "x");

export const intervalText = (lower, upper, separator = " – ") =>
  lower == null ? "–" : `${sig3(lower)}${separator}${sig3(upper)}`;

export const badge = (status, text) => `<span class="badge ${esc(status)}">${esc(text ?? status)}</span>`;

export const family = (name) => name.split("/")[0];

export const short = (commit) => String(commit ?? "").slice(0, 8);

export const when = (t) =>
  t == null
    ? "–"
    : new Date(typeof t === "number" ? t * 1000 : t).toISOString().slice(0, 16).replace("T", " ");

// A run's commit as a dashboard shows it: short SHA, subject, author.
export const commitCell = (r) =>
  `<code>${esc(short(r.commit))}</code> ${esc(r.subject ?? "")}${r.author ? ` <span class="muted">· ${esc(r.author)}</span>` : ""}`;

// A failed run names the stage that failed, so a list says why without a click.
export const verdictBadge = (r) =>
  r.acknowledged
    ? badge("acknowledged", "pass (acknowledged)")
    : r.verdict === "failed" && r.failed_stage
      ? badge("failed", `${r.failed_stage} failed`)
      : badge(r.verdict);

// Where a run measured: its GPU, its CPU on a host without one, or nothing
// (a run that failed before measuring).
export const deviceText = (r) =>
  r.gpu_model === "none" ? "–" : r.device_kind === "cpu" ? `CPU: ${r.gpu_model}` : r.gpu_model;

// The branches a project has runs on, the default branch first.
export async function branchSelect(project, branch) {
  const branches = await api(`/api/v1/projects/${enc(project)}/branches`);
  return `<label>branch <select id="branch">${branches.map((b) => `<option value="${esc(b.default ? "" : b.branch)}" ${(b.default ? !branch : b.branch === branch) ? "selected" : ""}>${esc(b.branch)}${b.default ? " (default)" : ""}</option>`).join("")}</select></label>`;
}

export const enc = encodeURIComponent;

// Where reads need a token, the one typed into the login form is kept in
// session storage: for this tab, gone when it closes.
export const TOKEN_KEY = "kw-read-token";

export class NeedsToken extends Error {}

export async function api(path, { method = "GET", payload, token = sessionStorage.getItem(TOKEN_KEY) } = {}) {
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  if (payload !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: payload === undefined ? undefined : JSON.stringify(payload),
  });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) throw new NeedsToken(body.message ?? "this server needs a token");
  if (!response.ok) throw new Error(`${path}: ${body.message ?? response.status}`);
  return body;
}

export function loginPage(reason) {
  app.innerHTML = `<h1>Sign in</h1>
    <form id="login" class="card login"><p>${esc(reason)}. Paste a token (scope read, or any token of yours); it is kept in this tab only.</p>
      <label>token <input id="token" name="token" type="password" autocomplete="off" size="60"></label>
      <button type="submit">Sign in</button></form>`;
  document.getElementById("login").onsubmit = (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    rerender();
  };
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  rerender();
}

// "page 2 of 7" with links that keep the rest of the query.
export function pager(paging, query) {
  if (!paging || paging.pages <= 1) return "";
  const { parts } = parseHash();
  const link = (n, text) => {
    const q = new URLSearchParams(query);
    q.set("page", n);
    return `<a class="page-link" href="#/${parts.map(enc).join("/")}?${q}">${text}</a>`;
  };
  return `<p class="pager">${paging.page > 1 ? link(paging.page - 1, "← previous") : ""}
    <span>cases ${(paging.page - 1) * paging.per_page + 1}–${Math.min(paging.cases_total, paging.page * paging.per_page)} of ${paging.cases_total} · page ${paging.page} of ${paging.pages}</span>
    ${paging.page < paging.pages ? link(paging.page + 1, "next →") : ""}</p>`;
}

// A case's comparison statuses, as the overview and compare filter by them.
export function statusOptions(selected) {
  return `<option value="">any</option>${[
    "regression",
    "improvement",
    "unchanged",
    "inconclusive",
    "no-baseline",
    "undetectable",
  ]
    .map((s) => `<option ${s === selected ? "selected" : ""}>${s}</option>`)
    .join("")}`;
}

export function pageQuery(query) {
  const q = new URLSearchParams();
  for (const key of ["page", "per_page"]) if (query.get(key)) q.set(key, query.get(key));
  return q;
}

export function parseHash() {
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  return {
    parts: path.split("/").filter(Boolean).map(decodeURIComponent),
    query: new URLSearchParams(query),
  };
}

export function setQuery(params) {
  const { parts } = parseHash();
  const q = new URLSearchParams(params);
  for (const [k, v] of [...q]) if (!v) q.delete(k);
  location.hash = "#/" + parts.map(enc).join("/") + (q.toString() ? "?" + q : "");
}

// The router draws the page again after a sign-in or a form's POST; it
// registers itself here, so a page need not import it.
let render = () => {};
export function onRender(draw) {
  render = draw;
}
export function rerender() {
  return render();
}
