// A project's overview: recent runs, every case with its sparkline.
import { plot } from "../charts.js";
import { api, app, badge, branchSelect, commitCell, enc, esc, family, pageQuery, pager, ratioText, setQuery, short, us, verdictBadge, when } from "../lib.js";

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

export async function overviewPage(project, query) {
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
