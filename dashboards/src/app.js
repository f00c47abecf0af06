// kernelwatch dashboard: hash-routed pages over the kw-server API, charts by
// uPlot. Every selection lives in the URL (#/p/PROJECT?gpu=..., #/run/ID, ...)
// so links are deep and back/forward work.
import uPlot from "./vendor/uPlot.esm.js";

const app = document.getElementById("app");
const tooltip = document.getElementById("tooltip");
const charts = [];  // live uPlot instances, destroyed on navigation
window.kwCharts = charts;  // the browser tests read what was drawn

// ---------- helpers
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const us = (ns) => (ns == null ? "–" : (ns / 1000).toLocaleString(undefined, { maximumFractionDigits: ns < 1e5 ? 2 : 1 }) + " µs");
const ratioText = (r) => (r == null ? "–" : r.toFixed(3) + "x");
const badge = (status, text) => `<span class="badge ${esc(status)}">${esc(text ?? status)}</span>`;
const family = (name) => name.split("/")[0];
const short = (commit) => String(commit ?? "").slice(0, 8);
const when = (t) => (t == null ? "–" : new Date(typeof t === "number" ? t * 1000 : t).toISOString().slice(0, 16).replace("T", " "));
// A run's commit as a dashboard shows it: short SHA, subject, author.
const commitCell = (r) => `<code>${esc(short(r.commit))}</code> ${esc(r.subject ?? "")}${r.author ? ` <span class="muted">· ${esc(r.author)}</span>` : ""}`;
const verdictBadge = (r) => (r.acknowledged ? badge("acknowledged", "pass (acknowledged)") : badge(r.verdict));

// The branches a project has runs on, the default branch first.
async function branchSelect(project, branch) {
  const branches = await api(`/api/v1/projects/${enc(project)}/branches`);
  return `<label>branch <select id="branch">${branches.map((b) => `<option value="${esc(b.default ? "" : b.branch)}" ${(b.default ? !branch : b.branch === branch) ? "selected" : ""}>${esc(b.branch)}${b.default ? " (default)" : ""}</option>`).join("")}</select></label>`;
}
const enc = encodeURIComponent;

// Where reads need a token, the one typed into the login form is kept in
// session storage: for this tab, gone when it closes.
const TOKEN_KEY = "kw-read-token";
class NeedsToken extends Error {}

async function api(path, { method = "GET", payload, token = sessionStorage.getItem(TOKEN_KEY) } = {}) {
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  if (payload !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, { method, headers, body: payload === undefined ? undefined : JSON.stringify(payload) });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) throw new NeedsToken(body.message ?? "this server needs a token");
  if (!response.ok) throw new Error(`${path}: ${body.message ?? response.status}`);
  return body;
}

function loginPage(reason) {
  app.innerHTML = `<h1>Sign in</h1>
    <form id="login" class="card login"><p>${esc(reason)}. Paste a token (scope read, or any token of yours); it is kept in this tab only.</p>
      <label>token <input id="token" name="token" type="password" autocomplete="off" size="60"></label>
      <button type="submit">Sign in</button></form>`;
  document.getElementById("login").onsubmit = (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    route();
  };
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  route();
}

// "page 2 of 7" with links that keep the rest of the query.
function pager(paging, query) {
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

function pageQuery(query) {
  const q = new URLSearchParams();
  for (const key of ["page", "per_page"]) if (query.get(key)) q.set(key, query.get(key));
  return q;
}

function parseHash() {
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(query) };
}

function setQuery(params) {
  const { parts } = parseHash();
  const q = new URLSearchParams(params);
  for (const [k, v] of [...q]) if (!v) q.delete(k);
  location.hash = "#/" + parts.map(enc).join("/") + (q.toString() ? "?" + q : "");
}

function clearCharts() {
  while (charts.length) charts.pop().destroy();
}

// Wheel zooms the x range, drag pans it (uPlot leaves interaction to plugins).
function panZoomPlugin() {
  return {
    hooks: {
      ready: (u) => {
        const over = u.over;
        let dragX = null, dragMin = 0, dragMax = 0;
        over.addEventListener("wheel", (e) => {
          e.preventDefault();
          const { min, max } = u.scales.x;
          const at = u.posToVal(e.offsetX, "x");
          const factor = e.deltaY < 0 ? 0.8 : 1.25;
          u.setScale("x", { min: at - (at - min) * factor, max: at + (max - at) * factor });
        }, { passive: false });
        over.addEventListener("mousedown", (e) => {
          if (e.button !== 0) return;
          dragX = e.clientX; dragMin = u.scales.x.min; dragMax = u.scales.x.max;
        });
        window.addEventListener("mouseup", () => { dragX = null; });
        window.addEventListener("mousemove", (e) => {
          if (dragX == null) return;
          const per = (dragMax - dragMin) / u.bbox.width * devicePixelRatio;
          const dx = (e.clientX - dragX) * per;
          u.setScale("x", { min: dragMin - dx, max: dragMax - dx });
        });
      },
    },
  };
}

function plot(el, opts, data) {
  const chart = new uPlot(opts, data, el);
  charts.push(chart);
  return chart;
}

// ---------- pages
async function projectsPage() {
  const projects = await api("/api/v1/projects");
  app.innerHTML = `<h1>Projects</h1><table><thead><tr><th>project</th><th>default branch</th><th class="num">runs</th><th>last run</th></tr></thead><tbody>
    ${projects.map((p) => `<tr class="clickable" data-href="#/p/${enc(p.name)}"><td><a href="#/p/${enc(p.name)}">${esc(p.name)}</a></td>
      <td>${esc(p.default_branch)}</td><td class="num">${p.runs}</td><td>${esc(p.last_run_at ?? "–")}</td></tr>`).join("")}
    </tbody></table>${projects.length ? "" : '<p class="muted">No runs yet: point an agent at this server or post a report.</p>'}`;
}

// The newest runs of every branch, pull requests included: where a pull
// request's regression shows on the overview.
function recentRuns(project, runs) {
  if (!runs.length) return "";
  return `<h2>Recent runs</h2><table id="recent-runs"><thead><tr><th>run</th><th>verdict</th><th>branch</th><th>commit</th><th>GPU</th><th>finished</th></tr></thead><tbody>
    ${runs.map((r) => `<tr class="clickable" data-href="#/run/${r.id}"><td><a href="#/run/${r.id}">${r.id}</a></td><td>${verdictBadge(r)}</td>
      <td>${esc(r.branch)}${r.base_commit ? ` <span class="muted">(vs ${esc(short(r.base_commit))})</span>` : ""}</td>
      <td>${commitCell(r)}</td><td>${esc(r.gpu_model)}</td><td>${when(r.finished_at)}</td></tr>`).join("")}</tbody></table>
    <p><a id="all-regressions" href="#/p/${enc(project)}/regressions">every regression of ${esc(project)} →</a></p>`;
}

// Where the project's notifications go, said only when one is failing: a
// paused target gets no attempt until its pause ends.
function notificationTargets(targets) {
  const unwell = targets.filter((t) => t.state !== "ok");
  if (!unwell.length) return "";
  return `<div class="warning" id="notification-targets">${unwell.map((t) =>
    `<p>Notifications to <code>${esc(t.target)}</code> are ${t.state === "paused" ? `paused until ${esc(t.paused_until)}` : "failing"}
     after ${t.consecutive_failures} failed attempts in a row (${t.pending} waiting): ${esc(t.last_error ?? "")}</p>`).join("")}</div>`;
}

async function overviewPage(project, query) {
  const gpu = query.get("gpu") ?? "", fam = query.get("family") ?? "", branch = query.get("branch") ?? "";
  const paging = pageQuery(query);
  paging.set("gpu", gpu);
  if (branch) paging.set("branch", branch);
  const [overview, runs, branches, settings] = await Promise.all([
    api(`/api/v1/projects/${enc(project)}/overview?${paging}`),
    api(`/api/v1/projects/${enc(project)}/runs?limit=10${branch ? `&branch=${enc(branch)}` : ""}`),
    branchSelect(project, branch),
    api(`/api/v1/projects/${enc(project)}`)]);
  const rows = overview.cases.filter((c) => !fam || family(c.case) === fam);
  const families = [...new Set(overview.cases.map((c) => family(c.case)))].sort();
  app.innerHTML = `<h1>${esc(project)}</h1>${notificationTargets(settings.notification_targets ?? [])}
    <div class="filters">
      ${branches}
      <label>GPU model <select id="gpu"><option value="">all</option>${overview.gpu_models.map((g) => `<option ${g === gpu ? "selected" : ""}>${esc(g)}</option>`).join("")}</select></label>
      <label>kernel family <select id="family"><option value="">all</option>${families.map((f) => `<option ${f === fam ? "selected" : ""}>${esc(f)}</option>`).join("")}</select></label>
      <a href="#/compare?project=${enc(project)}">compare two commits</a>
    </div>${recentRuns(project, runs)}
    <h2>Cases${branch ? ` on ${esc(branch)}` : ""}</h2>${pager(overview.paging, query)}
    <table id="overview"><thead><tr><th></th><th>case</th><th>GPU</th><th class="num">median</th><th class="num">speedup vs in-run baseline</th>
      <th class="num">change vs previous baseline</th><th>last 30 runs</th></tr></thead><tbody>
    ${rows.map((c, i) => {
      const status = c.comparison?.status ?? "no-baseline";
      const baselines = Object.entries(c.median_ns).filter(([impl]) => impl !== "candidate");
      const speedups = baselines.map(([impl, m]) => `${(m / c.median_ns.candidate).toFixed(2)}x ${esc(impl.replace("baseline:", ""))}`).join("<br>");
      const href = `#/p/${enc(project)}/case/${enc(c.case)}?gpu=${enc(c.gpu_model)}${branch ? `&branch=${enc(branch)}` : ""}`;
      return `<tr class="clickable" data-href="${href}"><td><span class="dot ${status}" title="${status}"></span></td>
        <td><a href="${href}">${esc(c.case)}</a></td><td>${esc(c.gpu_model)}</td><td class="num">${us(c.median_ns.candidate)}</td>
        <td class="num">${speedups || "–"}</td>
        <td class="num">${c.comparison?.ratio ? `${ratioText(c.comparison.ratio)} <span class="muted">[${c.comparison.lower.toFixed(3)}, ${c.comparison.upper.toFixed(3)}]</span>` : "–"} ${badge(status)}</td>
        <td><div class="spark" id="spark-${i}"></div></td></tr>`;
    }).join("")}</tbody></table>`;
  document.getElementById("branch").onchange = (e) => setQuery({ branch: e.target.value, gpu, family: fam });
  document.getElementById("gpu").onchange = (e) => setQuery({ branch, gpu: e.target.value, family: fam });
  document.getElementById("family").onchange = (e) => setQuery({ branch, gpu, family: e.target.value });
  rows.forEach((c, i) => {
    const history = c.history ?? [];
    plot(document.getElementById(`spark-${i}`), {
      width: 160, height: 32, legend: { show: false }, cursor: { show: false }, select: { show: false },
      axes: [{ show: false }, { show: false }], scales: { x: { time: false } },
      series: [{}, { stroke: c.comparison?.status === "regression" ? "#d92d20" : "#2e90fa", width: 1.5, points: { show: false } }],
    }, [history.map((_, k) => k), history]);
  });
}

// Every run that flagged a regression, newest first, each with the cases it
// flagged; an acknowledged one stays, marked, with who and why on its page.
async function regressionsPage(project, query) {
  const branch = query.get("branch") ?? "";
  const [runs, branches] = await Promise.all([
    api(`/api/v1/projects/${enc(project)}/regressions?limit=200${branch ? `&branch=${enc(branch)}` : ""}`),
    branchSelect(project, branch)]);
  app.innerHTML = `<h1>Regressions <span class="muted">· <a href="#/p/${enc(project)}">${esc(project)}</a></span></h1>
    <div class="filters">${branches}
      <span class="muted">${runs.length} run(s) flagged, ${runs.filter((r) => !r.acknowledged).length} not acknowledged</span></div>
    ${runs.length ? `<table id="regressions"><thead><tr><th>run</th><th>status</th><th>branch</th><th>commit</th><th>GPU</th><th>cases flagged (time vs baseline, 99% interval)</th><th>finished</th></tr></thead><tbody>
      ${runs.map((r) => `<tr class="clickable" data-href="#/run/${r.id}"><td><a href="#/run/${r.id}">${r.id}</a></td><td>${verdictBadge(r)}</td><td>${esc(r.branch)}</td>
        <td>${commitCell(r)}</td><td>${esc(r.gpu_model)}</td>
        <td>${(r.regressions ?? []).map((c) => `${esc(c.case)}${c.kind === "energy" ? " (energy)" : ""} <b>${ratioText(c.ratio)}</b> <span class="muted">[${c.lower.toFixed(3)}, ${c.upper.toFixed(3)}]</span>`).join("<br>")}</td>
        <td>${when(r.finished_at)}</td></tr>`).join("")}</tbody></table>`
      : `<p class="muted" id="no-regressions">No run of ${esc(project)}${branch ? ` on ${esc(branch)}` : ""} has flagged a regression.</p>`}`;
  document.getElementById("branch").onchange = (e) => setQuery({ branch: e.target.value });
}

// The hover card of a chart point: the commit (short SHA, subject, author,
// when), what was measured, and links. A click pins it so its links can be
// followed; Escape or a click elsewhere lets it go.
let pinnedCard = false;
function showCard(html, x, y) {
  tooltip.innerHTML = html;
  tooltip.hidden = false;
  tooltip.style.left = Math.min(x + 14, window.innerWidth - tooltip.offsetWidth - 8) + "px";
  tooltip.style.top = y + 14 + "px";
}
function unpinCard() {
  pinnedCard = false;
  tooltip.classList.remove("pinned");
  tooltip.hidden = true;
}
document.addEventListener("keydown", (e) => { if (e.key === "Escape") unpinCard(); });
document.addEventListener("click", (e) => { if (pinnedCard && !e.target.closest("#tooltip, .u-over")) unpinCard(); });

async function casePage(project, name, query) {
  const gpu = query.get("gpu") ?? "", branch = query.get("branch") ?? "";
  const [series, settings, branches] = await Promise.all([
    api(`/api/v1/projects/${enc(project)}/series?case=${enc(name)}&gpu=${enc(gpu)}&branch=${enc(branch)}&limit=10000`),
    api(`/api/v1/projects/${enc(project)}`),
    branchSelect(project, branch)]);
  const n = series.run_id.length;
  const gpus = [...new Set(series.gpu_model)];
  const where = branch || settings.default_branch;
  // A chart is drawn only where it has something to show; otherwise a line says why.
  const impls = [...new Set(series.median_ns.flatMap((m) => Object.keys(m)).filter((i) => i !== "candidate"))];
  const energy = series.energy_j ?? [], hasEnergy = energy.some((e) => e != null);
  app.innerHTML = `<h1>${esc(name)} <span class="muted">· <a href="#/p/${enc(project)}">${esc(project)}</a></span></h1>
    <div class="filters">${branches}<label>GPU model <select id="gpu"><option value="">all</option>${gpus.concat(gpu && !gpus.includes(gpu) ? [gpu] : []).map((g) => `<option ${g === gpu ? "selected" : ""}>${esc(g)}</option>`).join("")}</select></label>
    <span class="muted">${n} runs on ${esc(where)}, in commit order · drag to pan, wheel to zoom, click a point to pin its card</span></div>
    ${n ? `<h2>Median time (µs) with 95% interval</h2><div class="chart" id="time-chart"></div>`
        : `<p class="muted" id="no-runs">No run of this case on ${esc(where)}${gpu ? ` on ${esc(gpu)}` : ""} yet.</p>`}
    ${n && impls.length ? `<h2>Speedup over the in-run baselines</h2><div class="chart" id="speedup-chart"></div>`
        : n ? `<p class="muted" id="no-baselines">No speedup to chart: this case's bench measures no in-run baseline (a cuDNN or cuBLAS implementation run beside it).</p>` : ""}
    ${hasEnergy ? `<h2>Energy per iteration (mJ)</h2><div class="chart" id="energy-chart"></div>`
        : n ? `<p class="muted" id="no-energy">No energy to chart: no run measured it (kernelwatch.json <code>full_bench.energy_seconds</code>, on a GPU whose NVML reads energy).</p>` : ""}`;
  document.getElementById("branch").onchange = (e) => setQuery({ branch: e.target.value, gpu });
  document.getElementById("gpu").onchange = (e) => setQuery({ branch, gpu: e.target.value });
  if (!n) return;
  // One point per run, in commit order: the axis is the commits, labelled by short SHA.
  const x = series.run_id.map((_, k) => k);
  const commitAxis = {
    space: 80, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000],
    values: (u, splits) => splits.map((v) => (Number.isInteger(v) && v >= 0 && v < n ? short(series.commit[v]) : "")),
  };
  const timeSeries = [{ label: "commit", value: (u, v) => (v == null ? "–" : short(series.commit[v])) }], timeData = [x], bands = [];
  for (const g of gpus) {
    const own = (k) => series.gpu_model[k] === g;
    const median = series.median_ns.map((m, k) => (own(k) ? m.candidate / 1000 : null));
    const low = series.band_ns.map((b, k) => (own(k) && b.candidate ? b.candidate[0] / 1000 : null));
    const high = series.band_ns.map((b, k) => (own(k) && b.candidate ? b.candidate[1] / 1000 : null));
    const base = timeData.length;
    timeData.push(median, low, high);
    timeSeries.push({ label: g, stroke: ["#2e90fa", "#7a5af8", "#12a150", "#f79009"][bands.length / 2 % 4], width: 1.5, spanGaps: true, points: { size: 4 } },
                    { label: `${g} low`, stroke: "transparent", spanGaps: true, points: { show: false } },
                    { label: `${g} high`, stroke: "transparent", spanGaps: true, points: { show: false } });
    bands.push({ series: [base + 2, base + 1], fill: "rgba(46,144,250,0.15)" }, { series: [base, base + 1], fill: "rgba(0,0,0,0)" });
  }
  // A branch's runs against their base: the base commit's level, dashed.
  const baseLevel = (series.base_ns ?? []).map((b) => (b == null ? null : b / 1000));
  if (baseLevel.some((b) => b != null)) {
    timeData.push(baseLevel);
    timeSeries.push({ label: "base", stroke: "#667085", dash: [6, 4], width: 1.5, spanGaps: true, points: { size: 3 } });
  }
  const mark = (want) => series.median_ns.map((m, k) => (series.status[k] === "regression" && series.acknowledged[k] === want ? m.candidate / 1000 : null));
  timeData.push(mark(false), mark(true));
  timeSeries.push({ label: "regression", stroke: "#d92d20", paths: () => null, points: { size: 11, fill: "#d92d20", stroke: "#d92d20" } },
                  { label: "acknowledged", stroke: "#f79009", paths: () => null, points: { size: 11, fill: "#f79009", stroke: "#f79009" } });
  const width = Math.min(1300, app.clientWidth - 20);
  const card = (k) => {
    const commit = series.commit[k], m = series.median_ns[k];
    const github = settings.github_repo ? ` · <a href="https://github.com/${esc(settings.github_repo)}/commit/${esc(commit)}" target="_blank" rel="noopener">commit on GitHub</a>` : "";
    return `<div class="card-commit"><code>${esc(short(commit))}</code> ${esc(series.subject[k] ?? "")}</div>
      <div class="card-meta">${series.author[k] ? `${esc(series.author[k])} · ` : ""}${series.committed_at[k] != null ? `committed ${when(series.committed_at[k])}` : `measured ${when(series.finished_at[k])}`}</div>
      <div>${esc(series.gpu_model[k])} · median ${us(m.candidate)} · ${esc(series.status[k] ?? "no comparison")}${series.acknowledged[k] ? " (acknowledged)" : ""}</div>
      ${energy[k] != null ? `<div class="card-energy">${(1000 * energy[k]).toPrecision(4)} mJ per iteration at ${Math.round(series.power_w[k])} W · energy ${esc(series.energy_status[k] ?? "not compared")}</div>` : ""}
      <div class="card-links"><a class="card-run" href="#/run/${series.run_id[k]}">run ${series.run_id[k]} →</a>${github}</div>`;
  };
  const hover = (u) => {
    if (pinnedCard) return;
    const k = u.cursor.idx;
    if (k == null || u.cursor.left < 0) { tooltip.hidden = true; return; }
    const rect = u.over.getBoundingClientRect();
    showCard(card(k), rect.left + u.cursor.left, rect.top + u.cursor.top);
  };
  const common = (height) => ({
    width, height, plugins: [panZoomPlugin()], cursor: { drag: { x: false, y: false } }, scales: { x: { time: false } },
    hooks: { setCursor: [hover], ready: [(u) => {
      u.over.addEventListener("click", () => {
        const k = u.cursor.idx;
        if (k == null) return;
        pinnedCard = false;
        hover(u);
        pinnedCard = true;
        tooltip.classList.add("pinned");
      });
      u.over.addEventListener("mouseleave", () => { if (!pinnedCard) tooltip.hidden = true; });
    }] },
  });
  const timeChart = plot(document.getElementById("time-chart"), { ...common(320), series: timeSeries, bands, axes: [commitAxis, { label: "µs" }] }, timeData);
  timeChart.root.dataset.points = String(n);
  if (hasEnergy) {
    const energyData = [x], energySeries = [timeSeries[0]];
    gpus.forEach((g, i) => {
      energyData.push(energy.map((e, k) => (series.gpu_model[k] === g && e != null ? 1000 * e : null)));
      energySeries.push({ label: g, stroke: ["#2e90fa", "#7a5af8", "#12a150", "#f79009"][i % 4], width: 1.5, spanGaps: true, points: { size: 4 } });
    });
    energyData.push(energy.map((e, k) => (series.energy_status[k] === "regression" && e != null ? 1000 * e : null)));
    energySeries.push({ label: "more energy", stroke: "#d92d20", paths: () => null, points: { size: 11, fill: "#d92d20", stroke: "#d92d20" } });
    const energyChart = plot(document.getElementById("energy-chart"), { ...common(240), series: energySeries, axes: [commitAxis, { label: "mJ" }] }, energyData);
    energyChart.root.dataset.points = String(energy.filter((e) => e != null).length);
  }
  if (!impls.length) return;
  const speedupData = [x, ...impls.map((impl) => series.median_ns.map((m) => (m[impl] && m.candidate ? m[impl] / m.candidate : null)))];
  plot(document.getElementById("speedup-chart"), {
    ...common(240), axes: [commitAxis, { label: "x" }],
    series: [timeSeries[0], ...impls.map((impl, i) => ({ label: impl.replace("baseline:", "vs "), stroke: ["#12a150", "#7a5af8", "#f79009"][i % 3], spanGaps: true, width: 1.5 }))],
  }, speedupData);
}

// Each flagged case in numbers, first on the run page: base and head medians
// with their spread, the ratio and its interval, the speedup against each
// baseline on each side, and where the why and the profile are.
function flaggedCases(run) {
  const rows = run.flagged ?? [];
  if (!rows.length) return "";
  const spread = (noise) => (noise == null ? "" : ` <span class="muted">± ${(100 * noise).toFixed(1)}%</span>`);
  // The base's level: measured in the job, else the head's over the ratio.
  const baseNs = (f) => {
    if (f.base_ns != null) return f.base_ns;
    const r = Number.isFinite(f.ratio_of_medians) && f.ratio_of_medians > 0 ? f.ratio_of_medians : f.ratio;
    return f.head_ns && r ? f.head_ns / r : null;
  };
  const speedups = (f) => Object.keys(f.head_baselines ?? {}).map((impl) => {
    const head = f.head_ns ? f.head_baselines[impl] / f.head_ns : null;
    const base = f.base_baselines?.[impl] && f.base_ns ? f.base_baselines[impl] / f.base_ns : null;
    return `${esc(impl.replace("baseline:", "vs "))} ${base != null ? `${base.toPrecision(3)}x → ` : ""}${head != null ? `${head.toPrecision(3)}x` : "–"}`;
  }).join("<br>") || '<span class="muted">no baseline</span>';
  const profiled = new Set((run.profiles ?? []).map((p) => p.case));
  return `<div class="card" id="flagged"><table id="flagged-table"><thead><tr><th>flagged case</th><th></th><th class="num">base</th><th class="num">head</th>
    <th class="num">head / base</th><th class="num">99% interval</th><th>speedup, base → head</th><th>why</th></tr></thead><tbody>
    ${rows.map((f) => `<tr data-case="${esc(f.case)}"><td>${esc(f.case)}</td><td>${badge(f.status)}</td>
      <td class="num base-time">${us(baseNs(f))}${spread(f.base_noise)}${f.base_ns == null && f.baseline_run_id ? `<br><a class="muted" href="#/run/${f.baseline_run_id}" title="${esc(f.baseline_reason ?? "")}">stored run ${f.baseline_run_id}</a>` : ""}</td>
      <td class="num head-time">${us(f.head_ns)}${spread(f.head_noise)}</td>
      <td class="num">${ratioText(f.ratio)}</td><td class="num">${f.lower != null ? `${f.lower.toFixed(3)} – ${f.upper.toFixed(3)}` : "–"}</td>
      <td>${speedups(f)}</td>
      <td class="why"><a href="" data-scroll="explanation">explanation</a>${profiled.has(f.case) ? ' · <a href="" data-scroll="profiles">profile</a>' : ""}</td></tr>`).join("")}
    </tbody></table></div>`;
}

// The stages in the order they ran, each as wide as its wall time; the
// darker part is the time its bench processes held the GPU.
function stageTimeline(stages, onGpu = true) {
  const total = stages.reduce((sum, s) => sum + s.duration_ms, 0);
  if (total <= 0) return "";
  let offset = 0;
  const bars = stages.map((s) => {
    const left = (100 * offset) / total, width = (100 * s.duration_ms) / total;
    offset += s.duration_ms;
    const gpu = s.gpu_seconds ?? null;
    const gpuShare = gpu === null || s.duration_ms <= 0 ? 0 : Math.min(100, (100 * gpu * 1000) / s.duration_ms);
    const title = `${s.name}: ${(s.duration_ms / 1000).toFixed(1)} s${gpu === null || !onGpu ? "" : `, ${gpu.toFixed(1)} s on the GPU`} (${s.status})`;
    return `<div class="stage-bar ${esc(s.status)}" style="left:${left}%;width:${width}%" title="${esc(title)}">
      <div class="gpu" style="width:${gpuShare}%"></div><span>${esc(s.name)}</span></div>`;
  }).join("");
  return `<div id="timeline" class="timeline">${bars}</div>
    <p class="muted">${(total / 1000).toFixed(1)} s from the start of the build to the report${onGpu ? "; darker: on the GPU" : ""}</p>`;
}

async function runPage(id, query) {
  const run = await api(`/api/v1/runs/${enc(id)}?${pageQuery(query)}`);
  const verdict = run.acknowledgement ? badge("acknowledged", "pass (acknowledged)") : badge(run.verdict);
  const icon = { passed: "✔", failed: "✘", skipped: "–" };
  // A CPU run (Google Benchmark on a host without a GPU) has no GPU to name,
  // time on, launch or profile.
  const cpu = run.device?.kind === "cpu";
  const allPassed = run.stages.every((s) => s.status !== "failed");
  app.innerHTML = `<h1>Run ${run.id} ${verdict}</h1>
    ${decisionSummary(run)}${flaggedCases(run)}
    <div class="card"><dl class="meta">
      <dt>project</dt><dd><a href="#/p/${enc(run.project)}">${esc(run.project)}</a></dd>
      <dt>commit</dt><dd><code>${esc(run.commit)}</code> on ${esc(run.branch)}${run.base_commit ? ` (base <code>${esc(run.base_commit.slice(0, 12))}</code>)` : ""}
        ${run.git ? `<br><span id="commit-subject">${esc(run.git.subject ?? "")}</span> <span class="muted">· ${esc(run.git.author ?? "")}${run.git.committed_at ? ` · ${when(run.git.committed_at)}` : ""}</span>` : ""}</dd>
      ${cpu
        ? `<dt>CPU</dt><dd>${esc(run.gpu_model)}${run.device.sm_count ? ` · ${run.device.sm_count} cores` : ""} (no GPU: a CPU benchmark)</dd>`
        : `<dt>GPU</dt><dd>${esc(run.gpu_model)}${run.device ? ` · CC ${esc(run.device.compute_capability)} · driver ${esc(run.device.driver)} · ${run.device.sm_count} SMs` : ""}</dd>`}
      <dt>agent</dt><dd>${esc(run.agent.name)} ${esc(run.agent.version)}</dd>
      <dt>${cpu ? "bench seconds" : "GPU-seconds"}</dt><dd>${run.gpu_seconds.toFixed(1)}</dd>
      <dt>started</dt><dd>${esc(run.started_at)}</dd>
      ${run.acknowledgement ? `<dt>acknowledged</dt><dd id="acknowledgement">${acknowledgementText(run.acknowledgement)}</dd>` : ""}
      ${run.bisect ? `<dt>bisect</dt><dd id="bisect">${bisectText(run.bisect)}</dd>` : ""}
    </dl></div>${run.verdict === "regression" && !run.acknowledgement ? ackForm() : ""}
    <details id="preflight"${allPassed ? "" : " open"}><summary><h2>Preflight checklist</h2> <span class="muted">${allPassed ? `no stage failed (${run.stages.length} stages)` : "a stage failed"}</span></summary>
    ${stageTimeline(run.stages, !cpu)}
    <table id="stages"><thead><tr><th></th><th>stage</th><th>status</th><th class="num">duration</th>${cpu ? "" : '<th class="num">on the GPU</th>'}<th>message</th></tr></thead><tbody>
    ${run.stages.map((s) => `<tr><td>${icon[s.status]}</td><td>${esc(s.name)}</td><td>${badge(s.status)}</td><td class="num">${(s.duration_ms / 1000).toFixed(1)} s</td>
      ${cpu ? "" : `<td class="num">${s.gpu_seconds == null ? "" : `${s.gpu_seconds.toFixed(1)} s`}</td>`}
      <td>${esc(s.message)}${s.log_tail ? `<details><summary>log tail</summary><pre class="log">${esc(s.log_tail)}</pre></details>` : ""}</td></tr>`).join("")}
    </tbody></table></details>
    <h2>Comparisons</h2><p id="compare-link"></p>${pager(run.paging, query)}${comparisonTable(run.comparisons)}
    <div id="explanation"></div><div id="profiles"></div>
    <h2>Cases</h2><div id="cases"></div>${pager(run.paging, query)}`;
  const form = document.getElementById("ack");
  if (form) form.onsubmit = (e) => postWithCiToken(e, `/api/v1/runs/${run.id}/acknowledge`, (f) => ({ reason: String(f.get("reason")).trim() }), "ack-error", "not acknowledged");
  for (const link of document.querySelectorAll("[data-scroll]")) {
    link.onclick = (e) => {
      e.preventDefault();
      document.getElementById(link.dataset.scroll)?.scrollIntoView();
    };
  }
  if (run.flagged?.length || run.comparisons.some((c) => c.impl === "candidate" && (c.status === "regression" || c.status === "improvement"))) {
    const explained = await api(`/api/v1/runs/${enc(id)}/explanation`);
    document.getElementById("explanation").innerHTML = explanation(explained, cpu);
    // The first thing that changed, beside the case's numbers.
    for (const c of explained.cases) {
      const why = [...document.querySelectorAll("#flagged-table tr[data-case]")].find((row) => row.dataset.case === c.case)?.querySelector(".why");
      if (why && c.changes.length) why.insertAdjacentHTML("afterbegin", `${esc(c.changes[0])}<br>`);
    }
  }
  if (run.device?.kind !== "cpu" && run.gpu_model !== "none") {
    const section = document.getElementById("profiles");
    section.innerHTML = profiles(await api(`/api/v1/runs/${enc(id)}/profiles`), run);
    document.getElementById("profile-form").onsubmit = (e) => postWithCiToken(e, `/api/v1/runs/${run.id}/profiles`,
      (f) => ({ case: String(f.get("case")), launch_count: Number(f.get("launch_count")) }), "profile-error", "not queued");
  }
  const baselineRun = run.comparisons.find((c) => c.baseline_run_id)?.baseline_run_id;
  if (baselineRun) {
    const baseline = await api(`/api/v1/runs/${baselineRun}?per_page=1`);
    document.getElementById("compare-link").innerHTML =
      `<a id="compare-baseline" href="#/compare?project=${enc(run.project)}&base=${baseline.commit}&head=${run.commit}">compare every case with the baseline run ${baselineRun} (${esc(baseline.commit.slice(0, 12))})</a>`;
  }
  const container = document.getElementById("cases");
  run.cases.forEach((c, i) => {
    const div = document.createElement("div");
    div.className = "card";
    const e = c.expected_launch;
    const launches = c.launches.map((l) => {
      const blockBad = e && e.block && JSON.stringify(e.block) !== JSON.stringify(l.block);
      const gridBad = e && e.grid && JSON.stringify(e.grid) !== JSON.stringify(l.grid);
      return `<tr><td><code>${esc(l.kernel)}</code></td><td class="${gridBad ? "mismatch" : ""}">${esc(l.grid.join("×"))}</td>
        <td class="${blockBad ? "mismatch" : ""}">${esc(l.block.join("×"))}</td><td class="num">${l.registers}</td><td class="num">${l.static_smem + l.dynamic_smem}</td></tr>`;
    }).join("");
    const g = c.gpu_state;
    div.innerHTML = `<h3>${esc(c.name)}</h3>
      ${e ? `<p>expected: <code>${esc(e.kernel_pattern)}</code> ${e.block ? `block ${esc(e.block.join("×"))}` : "block as its autotuner picks"}${e.grid ? ` grid ${esc(e.grid.join("×"))}` : ""}</p>` : ""}
      ${launches ? `<table><thead><tr><th>observed kernel</th><th>grid</th><th>block</th><th class="num">registers</th><th class="num">shared bytes</th></tr></thead><tbody>${launches}</tbody></table>` : ""}
      ${c.correctness ? `<p>correctness ${badge(c.correctness.passed ? "passed" : "failed")} rel L2 ${c.correctness.rel_l2_err.toExponential(2)} · max abs ${c.correctness.max_abs_err.toExponential(2)} · tolerance ${c.correctness.tolerance} · non-finite ${c.correctness.nonfinite}</p>` : ""}
      ${g ? `<p class="muted">SM ${esc(g.sm_mhz.join(" → "))} MHz · memory ${esc(g.mem_mhz.join(" → "))} MHz · throttle reasons 0x${Number(g.throttle_reasons).toString(16)}${g.temp_c_max != null ? ` · ${g.temp_c_max} °C max` : ""}${g.power_w_max != null ? ` · ${g.power_w_max} W max` : ""}</p>` : ""}
      ${c.measurements.length ? `<table><thead><tr><th>implementation</th><th class="num">median</th><th class="num">samples</th><th class="num">throttled</th><th class="num">peak memory</th></tr></thead><tbody>
        ${c.measurements.map((m) => `<tr><td>${esc(m.impl)}</td><td class="num">${us(m.median_ns)}</td><td class="num">${m.samples_ns.length}</td><td class="num">${m.throttled_samples.length}</td><td class="num">${m.peak_mem_bytes != null ? (m.peak_mem_bytes / 2 ** 20).toFixed(1) + " MiB" : "–"}</td></tr>`).join("")}
        </tbody></table><div class="chart samples" id="samples-${i}"></div>` : ""}`;
    container.appendChild(div);
    if (!c.measurements.length) return;
    const longest = Math.max(...c.measurements.map((m) => m.samples_ns.length));
    plot(document.getElementById(`samples-${i}`), {
      width: Math.min(900, app.clientWidth - 40), height: 200, scales: { x: { time: false } },
      axes: [{ label: "sample (in the order taken)" }, { label: "µs" }],
      series: [{}, ...c.measurements.map((m, k) => ({ label: m.impl, stroke: ["#2e90fa", "#12a150", "#7a5af8", "#f79009"][k % 4], paths: () => null, points: { size: 4, fill: ["#2e90fa", "#12a150", "#7a5af8", "#f79009"][k % 4] } }))],
    }, [Array.from({ length: longest }, (_, k) => k), ...c.measurements.map((m) => Array.from({ length: longest }, (_, k) => (k < m.samples_ns.length ? m.samples_ns[k] / 1000 : null)))]);
  });
}

// What changed between a flagged case's baseline run and this run: the
// kernels launched and how, their occupancy, the build's spills.
function explanation(e, cpu = false) {
  if (!e.cases.length) return "";
  const launchRows = (side, label) => (side?.launches ?? []).map((l) => {
    const spill = side.build.find((b) => b.kernel === l.kernel);
    const o = l.occupancy;
    return `<tr><td>${label}</td><td><code>${esc(l.kernel)}</code></td><td>${esc(l.grid.join("×"))}</td><td>${esc(l.block.join("×"))}</td>
      <td class="num">${l.registers}</td><td class="num">${(l.shared_bytes / 1024).toFixed(1)} KB</td>
      <td class="num">${o ? `${Math.round(100 * o.fraction)}% <span class="muted">(${o.blocks_per_sm} blocks, ${esc(o.limited_by)})</span>` : "–"}</td>
      <td class="num">${spill ? `${spill.spill_stores} / ${spill.spill_loads}` : "–"}</td></tr>`;
  }).join("");
  return `<h2>What changed in the flagged cases</h2>${e.cases.map((c) => `<div class="card explained" data-case="${esc(c.case)}">
    <h3>${esc(c.case)} ${badge(c.status)} ${ratioText(c.ratio)}</h3>
    ${c.changes.length ? `<ul class="changes">${c.changes.map((line) => `<li>${esc(line)}</li>`).join("")}</ul>` : ""}
    ${c.note && !cpu ? `<p class="muted">${esc(c.note)}</p>` : ""}
    ${c.base && !cpu ? `<table><thead><tr><th></th><th>kernel</th><th>grid</th><th>block</th><th class="num">registers</th><th class="num">shared / block</th><th class="num">theoretical occupancy</th><th class="num">spill stores / loads (bytes)</th></tr></thead>
      <tbody>${launchRows(c.base, `base <a href="#/run/${c.base.run_id}">${esc(short(c.base.commit))}</a>`)}${launchRows(c.head, "head")}</tbody></table>` : ""}</div>`).join("")}`;
}

// Nsight Compute profiles of the run's cases: per kernel, base against head,
// its time, SM and memory throughput, achieved occupancy and top warp stalls;
// a form queues one (it needs a ci token, as acknowledging does).
function profiles(list, run) {
  const fmt = (v, digits = 1) => (v == null ? "–" : v.toFixed(digits));
  const table = (p) => {
    const sides = ["base", "head"].filter((side) => p.summary[side]);
    const kernels = [...new Set(sides.flatMap((side) => Object.keys(p.summary[side].kernels)))];
    const rows = kernels.flatMap((kernel) => sides.map((side) => {
      const k = p.summary[side].kernels[kernel];
      const label = `${side} <code>${esc(short(p.summary[side].commit))}</code>`;
      if (!k) return `<tr><td><code>${esc(kernel)}</code></td><td>${label}</td><td class="num">0</td><td colspan="5" class="muted">not launched</td></tr>`;
      return `<tr data-side="${side}"><td><code>${esc(kernel)}</code></td><td>${label}</td><td class="num">${k.launches}</td><td class="num">${fmt(k.time_us)} µs</td>
        <td class="num">${fmt(k.sm_pct)}%</td><td class="num">${fmt(k.memory_pct)}%</td><td class="num">${fmt(k.occupancy_pct)}%</td>
        <td>${k.stalls.map((st) => `${esc(st.reason)} ${st.cycles_per_issue.toFixed(2)}`).join(", ")}</td></tr>`;
    })).join("");
    return `<table class="profile"><thead><tr><th>kernel</th><th>side</th><th class="num">launches</th><th class="num">time</th><th class="num">SM</th><th class="num">memory</th><th class="num">achieved occupancy</th><th>top warp stalls (cycles per issued instruction)</th></tr></thead><tbody>${rows}</tbody></table>
      <p class="muted">raw ncu CSV: ${sides.map((side) => `<a href="/api/v1/profiles/${p.id}/ncu/${side}">${side}</a>`).join(" · ")} · ${p.launch_count} launches a side${p.kernel ? ` of kernels matching <code>${esc(p.kernel)}</code>` : ""}</p>`;
  };
  const card = (p) => `<div class="card profile-card" data-case="${esc(p.case)}" data-state="${esc(p.state)}">
    <h3>${esc(p.case)} ${badge(p.state === "done" ? "passed" : p.state === "failed" || p.state === "cancelled" ? "failed" : "pending", p.state)}
      <span class="muted">${p.reason === "worst_regression" ? "the regression's worst case" : `asked by ${esc(p.requested_by)}`} · <a href="#/job/${p.job_id}">job ${p.job_id}</a></span></h3>
    ${p.state === "done" ? table(p) : p.state === "failed" || p.state === "cancelled" ? `<p class="error">${esc(p.error ?? "")}</p>` : '<p class="muted">waiting for an agent with Nsight Compute on this GPU model</p>'}</div>`;
  return `<h2>Nsight Compute profiles</h2>${list.map(card).join("") || '<p class="muted">No case of this run was profiled.</p>'}
    <form id="profile-form" class="card"><p>Profile a case under Nsight Compute in this commit and the one it was compared with (an agent with ncu on ${esc(run.gpu_model)} runs it). It needs a ci token.</p>
      <label>case <select name="case">${run.cases.map((c) => `<option>${esc(c.name)}</option>`).join("")}</select></label>
      <label>launches <input name="launch_count" type="number" min="1" max="1000" value="10"></label>
      <label>ci token <input name="token" type="password" autocomplete="off" size="30" value="${esc(sessionStorage.getItem(CI_TOKEN_KEY) ?? "")}"></label>
      <button type="submit">Profile</button><p id="profile-error" class="error" hidden></p></form>`;
}

// Which of the push's commits brought the regression.
function bisectText(b) {
  const where = `over the ${b.commits} pushed commits (bisect ${b.id}, ${b.steps} step${b.steps === 1 ? "" : "s"})`;
  if (b.state === "found") return `first bad commit <code>${esc(short(b.first_bad))}</code> ${where}${b.message?.includes(", or one of") ? ` <span class="muted">${esc(b.message)}</span>` : ""}`;
  if (b.state === "running") return `bisecting ${where}`;
  return `${esc(b.state)} ${where}: ${esc(b.message ?? "")}`;
}

function acknowledgementText(a) {
  const from = a.carried_from;
  return `by ${esc(a.by)}: ${esc(a.reason)}${from ? ` <span class="muted">(carried from <a href="#/run/${from.run_id}">run ${from.run_id}</a> of <code>${esc(short(from.commit))}</code> on ${esc(from.branch)}, ${from.same_tree ? "the same tree" : "which this commit merges"})</span>` : ""}`;
}

// Acknowledging needs a ci token (or an admin's): kept for this tab only,
// like the read token, and never sent anywhere but this server.
const CI_TOKEN_KEY = "kw-ci-token";
function ackForm() {
  return `<form id="ack" class="card ack"><p>An intended slowdown? Acknowledge it: the verdict becomes pass (who and why are recorded) and the merge gate opens. It needs a ci token.</p>
    <label>reason <input name="reason" required maxlength="2000" placeholder="why this slowdown is intended"></label>
    <label>ci token <input name="token" type="password" autocomplete="off" size="30" value="${esc(sessionStorage.getItem(CI_TOKEN_KEY) ?? "")}"></label>
    <button type="submit">Acknowledge</button><p id="ack-error" class="error" hidden></p></form>`;
}

// A form that POSTs with the ci token typed into it: the token is kept for
// the tab once it worked; the server's reason is shown when it did not.
async function postWithCiToken(e, path, payloadOf, errorId, failed) {
  e.preventDefault();
  const f = new FormData(e.target), error = document.getElementById(errorId);
  const token = String(f.get("token")).trim();
  try {
    await api(path, { method: "POST", payload: payloadOf(f), token });
    sessionStorage.setItem(CI_TOKEN_KEY, token);
    await route();
  } catch (failure) {
    error.hidden = false;
    error.textContent = `${failed}: ${failure instanceof NeedsToken ? failure.message : failure.message.replace(/^[^:]*: /, "")}`;
  }
}

// How the run was judged: the false-alarm rate over its candidate
// comparisons, the noise prior, and whether the baselines moved together.
function decisionSummary(run) {
  const d = run.detection;
  if (!d) return "";
  const prior = d.noise_prior;
  const drift = d.machine_drift;
  return `<div class="card" id="decision"><p>Judged on ${d.comparisons} candidate comparison(s), at most ${(100 * d.run_alpha).toFixed(1)}% chance of any false flag in the run (Holm).
    ${prior ? `Noise on ${esc(prior.gpu_model)}: between replicates ${(100 * prior.replicate_sd).toFixed(2)}% (${Math.round(prior.replicate_df)} df), between runs ${(100 * prior.run_sd).toFixed(2)}% (${Math.round(prior.run_df)} df).` : ""}</p>
    ${drift ? `<p id="machine-drift" class="${drift.flagged ? "mismatch" : "muted"}">${drift.flagged ? "Machine drift: " : ""}the baseline implementations moved ${ratioText(1 + drift.median_change)} (median of ${drift.comparisons}, ${drift.same_direction} the same way)${drift.flagged ? ": the GPU or its libraries changed, not only this commit" : ""}.</p>` : ""}</div>`;
}

function comparisonTable(rows) {
  if (!rows?.length) return '<p class="muted">No comparisons.</p>';
  return `<table class="comparisons"><thead><tr><th>case</th><th>kind</th><th>implementation</th><th>status</th><th class="num">ratio</th><th class="num">99% interval</th><th class="num">p</th><th class="num">threshold</th><th>baseline</th><th>note</th></tr></thead><tbody>
    ${rows.map((c) => `<tr><td>${esc(c.case)}</td><td>${esc(c.kind)}</td><td>${esc(c.impl ?? "")}</td><td>${badge(c.status)}</td><td class="num">${ratioText(c.ratio)}</td>
      <td class="num">${c.lower != null ? `${c.lower.toFixed(3)} – ${c.upper.toFixed(3)}` : "–"}</td><td class="num">${c.p_value != null ? c.p_value.toExponential(1) : "–"}</td>
      <td class="num threshold" title="${esc(c.threshold_source ?? "")}">${c.threshold != null ? (100 * c.threshold).toFixed(1) + "%" : "–"}</td>
      <td>${c.baseline_run_id ? `<a href="#/run/${c.baseline_run_id}">${esc(c.baseline_reason)}</a>` : esc(c.baseline_reason ?? "")}</td>
      <td class="muted">${esc(c.note)}${c.first_pass ? `<br><span class="first-pass">first pass: ${ratioText(c.first_pass.ratio)}, p ${c.first_pass.p_value.toExponential(1)} on ${c.first_pass.head_replicates} + ${c.first_pass.base_replicates} replicates; measured again</span>` : ""}</td></tr>`).join("")}</tbody></table>`;
}

async function comparePage(query) {
  const project = query.get("project") ?? "", base = query.get("base") ?? "", head = query.get("head") ?? "";
  app.innerHTML = `<h1>Compare two commits</h1>
    <form class="compare" id="compare-form">
      <label>project <input name="project" value="${esc(project)}"></label>
      <label>base commit <input name="base" value="${esc(base)}" placeholder="SHA, its first 7+ digits, or a branch"></label>
      <label>head commit <input name="head" value="${esc(head)}" placeholder="SHA, its first 7+ digits, or a branch"></label>
      <button type="submit">compare</button>
    </form><div id="compare-result"></div>`;
  document.getElementById("compare-form").onsubmit = (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    location.hash = `#/compare?project=${enc(f.get("project"))}&base=${enc(f.get("base"))}&head=${enc(f.get("head"))}`;
  };
  if (!base || !head) return;
  const result = await api(`/api/v1/compare?base=${enc(base)}&head=${enc(head)}${project ? `&project=${enc(project)}` : ""}`);
  document.getElementById("compare-result").innerHTML = result.gpus.length
    ? result.gpus.map((g) => `<h2>${esc(g.gpu_model)}: <a href="#/run/${g.head_run_id}">run ${g.head_run_id}</a> vs <a href="#/run/${g.base_run_id}">run ${g.base_run_id}</a></h2>
        <table id="compare-table"><thead><tr><th>case</th><th>status</th><th class="num">ratio (head / base)</th><th class="num">99% interval</th><th class="num">p</th><th class="num">threshold</th></tr></thead><tbody>
        ${g.cases.map((c) => `<tr><td>${esc(c.case)}</td><td>${badge(c.status)}</td><td class="num">${ratioText(c.ratio)}</td>
          <td class="num">${c.lower != null ? `${c.lower.toFixed(3)} – ${c.upper.toFixed(3)}` : "–"}</td><td class="num">${c.p_value != null ? c.p_value.toExponential(1) : "–"}</td>
          <td class="num threshold" title="${esc(c.threshold_source ?? "")}">${c.threshold != null ? (100 * c.threshold).toFixed(1) + "%" : "–"}</td></tr>`).join("")}</tbody></table>`).join("")
    : '<p class="muted">No GPU model has runs of both commits.</p>';
}

// A job before its report: the stages its agent streamed, each as it starts
// and ends, a failed one with the end of its log. The page polls until the
// report lands, then shows the run.
let jobPoll = null;
async function jobPage(id) {
  const job = await api(`/api/v1/jobs/${enc(id)}`);
  if (job.run_id) { location.replace(`#/run/${job.run_id}`); return; }
  const stages = job.stages ?? [];
  const rows = stages.map((s) => `<tr data-stage="${esc(s.name)}"><td>${esc(s.name)}</td><td>${badge(s.status === "started" ? "pending" : s.status, s.status === "started" ? "running" : s.status)}</td>
      <td class="num">${s.duration_ms != null && s.status !== "skipped" ? (s.duration_ms / 1000).toFixed(1) + " s" : "–"}</td><td>${esc(s.status === "passed" ? "" : s.message ?? "")}</td></tr>`).join("");
  const failed = stages.find((s) => s.status === "failed");
  app.innerHTML = `<h1>Job ${job.id} ${badge(job.state === "failed" ? "failed" : "pending", job.state)}</h1>
    <div class="card"><dl class="meta"><dt>project</dt><dd>${esc(job.project)}</dd><dt>commit</dt><dd><code>${esc(job.commit)}</code></dd>
    ${job.profile ? `<dt>profile</dt><dd>${esc(job.profile.case)} of <a href="#/run/${job.profile.run_id}">run ${job.profile.run_id}</a> under Nsight Compute</dd>` : ""}
    <dt>agent</dt><dd>${esc(job.agent ?? "–")}</dd><dt>attempts</dt><dd>${job.attempts} of ${job.max_attempts}</dd>${job.error ? `<dt>error</dt><dd>${esc(job.error)}</dd>` : ""}</dl></div>
    ${job.kind === "profile" ? "" : `<h2>Stages</h2>${stages.length ? `<table id="job-stages"><thead><tr><th>stage</th><th>status</th><th class="num">time</th><th>message</th></tr></thead><tbody>${rows}</tbody></table>`
      : '<p class="muted">No stage has started yet.</p>'}`}
    ${failed && failed.log_tail ? `<h2>${esc(failed.name)}: end of its log</h2><pre class="log">${esc(failed.log_tail)}</pre>` : ""}`;
  if (job.state === "queued" || job.state === "running") {
    const hash = location.hash;
    clearTimeout(jobPoll);
    jobPoll = setTimeout(() => { if (location.hash === hash) route(); }, 2000);
  }
}

// The GPU hosts: each worker of a multi-GPU host is an agent of its own,
// pinned to one GPU. An unhealthy one claims nothing; its failed checks say why.
async function agentsPage() {
  const agents = await api("/api/v1/agents");
  const gpuCell = (a) => (a.gpu ? `GPU ${a.gpu.index} · ${esc(a.gpu.model)}<br><code class="muted">${esc(a.gpu.uuid)}</code>` : esc((a.gpus ?? []).join(", ") || "no GPU"));
  const healthCell = (a) => {
    if (!a.health) return '<span class="muted">not checked</span>';
    const failed = a.health.checks.filter((c) => !c.passed);
    if (!failed.length) return `<span title="${esc(a.health.checks.map((c) => `${c.name}: ${c.message}`).join("\n"))}">healthy</span>`;
    return failed.map((c) => `<span class="mismatch">${esc(c.name)}: ${esc(c.message)}</span>`).join("<br>");
  };
  const stateBadge = { running: "pending", idle: "pass", unhealthy: "failed", offline: "no-data" };
  app.innerHTML = `<h1>Agents</h1>
    ${agents.length ? `<table id="agents"><thead><tr><th>agent</th><th>host</th><th>GPU</th><th>state</th><th>health</th><th>job</th><th>last seen</th></tr></thead><tbody>
      ${agents.map((a) => `<tr data-agent="${esc(a.name)}" data-state="${esc(a.state)}"><td>${esc(a.name)}</td><td>${esc(a.host)} <span class="muted">kw ${esc(a.version)}</span></td><td>${gpuCell(a)}</td>
        <td>${badge(stateBadge[a.state] ?? "no-data", a.state)}</td><td>${healthCell(a)}</td>
        <td>${a.job ? `<a href="#/job/${a.job.id}">job ${a.job.id}</a> <span class="muted">${esc(a.job.project)} <code>${esc(short(a.job.commit))}</code> ${esc(a.job.branch)}</span>` : "–"}</td>
        <td>${when(a.last_seen_at)}</td></tr>`).join("")}</tbody></table>`
      : '<p class="muted">No agent has claimed a job yet: start <code>kw agent</code> on a GPU host.</p>'}`;
}

// ---------- router
async function route() {
  clearCharts();
  unpinCard();
  const { parts, query } = parseHash();
  try {
    if (parts[0] === "p" && parts[2] === "case" && parts[3]) await casePage(parts[1], parts[3], query);
    else if (parts[0] === "p" && parts[2] === "regressions") await regressionsPage(parts[1], query);
    else if (parts[0] === "p" && parts[1]) await overviewPage(parts[1], query);
    else if (parts[0] === "run" && parts[1]) await runPage(parts[1], query);
    else if (parts[0] === "job" && parts[1]) await jobPage(parts[1]);
    else if (parts[0] === "compare") await comparePage(query);
    else if (parts[0] === "agents") await agentsPage();
    else await projectsPage();
    document.body.dataset.page = parts[0] ?? "projects";
  } catch (error) {
    if (error instanceof NeedsToken) loginPage(error.message);
    else app.innerHTML = `<p class="error">${esc(error.message)}</p>`;
  }
  document.getElementById("sign-out").hidden = !sessionStorage.getItem(TOKEN_KEY);
  app.dataset.ready = location.hash;
}

app.addEventListener("click", (e) => {
  const row = e.target.closest("tr.clickable");
  if (row && !e.target.closest("a")) location.hash = row.dataset.href;
});
document.getElementById("sign-out").onclick = (e) => { e.preventDefault(); signOut(); };
window.addEventListener("hashchange", route);
route();
