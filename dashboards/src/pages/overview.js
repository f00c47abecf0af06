// A project's overview: recent runs, every case with its sparkline.
import { detectableText } from "../comparisons.js";
import {
  api,
  app,
  badge,
  branchSelect,
  commitCell,
  deviceText,
  enc,
  esc,
  family,
  intervalText,
  pageQuery,
  pager,
  ratioText,
  setQuery,
  statusOptions,
  short,
  us,
  verdictBadge,
  when,
} from "../lib.js";

// The newest runs of every branch, pull requests included: where a pull
// request's regression shows on the overview.
function recentRuns(project, runs) {
  if (!runs.length) return "";
  return `<h2>Recent runs</h2><table id="recent-runs"><thead><tr><th>run</th><th>verdict</th><th>branch</th><th>commit</th><th>device</th><th>finished</th></tr></thead><tbody>
    ${runs
      .map(
        (
          r,
        ) => `<tr class="clickable" data-href="#/run/${r.id}"><td><a href="#/run/${r.id}">${r.id}</a></td><td>${verdictBadge(r)}</td>
      <td>${esc(r.branch)}${r.base_commit ? ` <span class="muted">(vs ${esc(short(r.base_commit))})</span>` : ""}</td>
      <td>${commitCell(r)}</td><td>${esc(deviceText(r))}</td><td>${when(r.finished_at)}</td></tr>`,
      )
      .join("")}</tbody></table>
    <p><a id="all-regressions" href="#/p/${enc(project)}/regressions">every regression of ${esc(project)} →</a></p>`;
}

// Where the project's notifications go, said only when one is failing: a
// paused target gets no attempt until its pause ends.
function notificationTargets(targets) {
  const unwell = targets.filter((t) => t.state !== "ok");
  if (!unwell.length) return "";
  return `<div class="warning" id="notification-targets">${unwell
    .map(
      (t) =>
        `<p>Notifications to <code>${esc(t.target)}</code> are ${t.state === "paused" ? `paused until ${esc(t.paused_until)}` : "failing"}
     after ${t.consecutive_failures} failed attempts in a row (${t.pending} waiting): ${esc(t.last_error ?? "")}</p>`,
    )
    .join("")}</div>`;
}

// Every case row is this tall, so the table draws only the rows in view
// (and a screenful either side) however many a page holds.
const ROW_HEIGHT = 40;
const OVERSCAN = 20;

// The candidate's recent medians as an SVG line: a page of thousands of
// cases draws no chart objects.
function sparkline(values, regression) {
  if (!values?.length) return "";
  const width = 160,
    height = 28;
  const lo = Math.min(...values),
    hi = Math.max(...values),
    span = hi - lo || 1;
  const points = values.map(
    (v, k) =>
      `${(values.length === 1 ? width / 2 : (k * width) / (values.length - 1)).toFixed(1)},${(height - 2 - ((v - lo) / span) * (height - 4)).toFixed(1)}`,
  );
  return `<svg class="spark" width="${width}" height="${height}" data-points="${values.length}"><polyline fill="none" stroke="${regression ? "#d92d20" : "#2e90fa"}" stroke-width="1.5" points="${points.join(" ")}"/></svg>`;
}

function caseRow(project, branch, c) {
  const status = c.comparison?.status ?? "no-baseline";
  const baselines = Object.entries(c.median_ns).filter(([impl]) => impl !== "candidate");
  const speedups = baselines
    .map(([impl, m]) => `${ratioText(m / c.median_ns.candidate)} ${esc(impl.replace("baseline:", ""))}`)
    .join(", ");
  const href = `#/p/${enc(project)}/case/${enc(c.case)}?gpu=${enc(c.gpu_model)}${branch ? `&branch=${enc(branch)}` : ""}`;
  return `<tr class="clickable case-row" data-href="${href}"><td><span class="dot ${status}" title="${status}"></span></td>
    <td><a href="${href}">${esc(c.case)}</a></td><td>${esc(c.gpu_model)}</td><td class="num">${us(c.median_ns.candidate)}</td>
    <td class="num">${speedups || "–"}</td>
    <td class="num">${c.comparison?.ratio ? `${ratioText(c.comparison.ratio)} <span class="muted">[${intervalText(c.comparison.lower, c.comparison.upper, ", ")}]</span>` : "–"} ${badge(status)}</td>
    <td class="num${c.comparison?.detectable > c.comparison?.threshold ? " undetectable" : ""}">${detectableText(c.comparison ?? {})}</td>
    <td>${sparkline(c.history ?? [], status === "regression")}</td></tr>`;
}

// Draws the rows in view of the scrolling box, with spacers standing in for
// the others, again on every scroll frame.
function virtualRows(box, rows, render) {
  const body = box.querySelector("tbody");
  const columns = box.querySelectorAll("thead th").length;
  const spacer = (px) =>
    px > 0 ? `<tr class="spacer" style="height:${px}px"><td colspan="${columns}"></td></tr>` : "";
  let drawn = "",
    pending = false;
  const draw = () => {
    pending = false;
    const first = Math.max(0, Math.floor(box.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(rows.length, first + Math.ceil(box.clientHeight / ROW_HEIGHT) + 2 * OVERSCAN);
    if (drawn === `${first}:${last}:${rows.length}`) return;
    drawn = `${first}:${last}:${rows.length}`;
    body.innerHTML =
      spacer(first * ROW_HEIGHT) +
      rows.slice(first, last).map(render).join("") +
      spacer((rows.length - last) * ROW_HEIGHT);
  };
  box.onscroll = () => {
    if (!pending) {
      pending = true;
      requestAnimationFrame(draw);
    }
  };
  box.scrollTop = 0;
  draw();
}

// Skipping identical code, as measured: of the identical cases timed anyway
// (the audit), how many the run flagged.
export function auditSummary(audit) {
  if (!audit || (!audit.audited && !audit.identical_to_base)) return "";
  // A rate with no bound says nothing (0 of 3 audited is "0%", at most 63%).
  const pct = (x) => `${(100 * x).toFixed(1)}%`;
  const rate =
    audit.miss_rate == null
      ? "no audit yet"
      : `${pct(audit.miss_rate)}, at most ${pct(audit.miss_rate_upper_95)} (95% bound)`;
  const byJob =
    audit.job_miss_rate == null
      ? ""
      : `; by job: ${audit.jobs_missed} of ${audit.jobs_audited} audited job(s) missed, at most ${pct(audit.job_miss_rate_upper_95)}`;
  const misses = (audit.recent_misses ?? [])
    .slice(0, 5)
    .map((m) => `<a href="#/run/${m.run_id}">${esc(m.case)}</a> (${esc(m.status)})`)
    .join(", ");
  return `<p id="audit" class="muted">Identical code, not timed: ${audit.identical_to_base} case(s) in pull requests.
    Audit: ${audit.audited} identical case(s) timed anyway, ${audit.misses} flagged; <strong>miss rate ${rate}</strong>${byJob}${misses ? `; newest: ${misses}` : ""}.</p>`;
}

export async function overviewPage(project, query) {
  const gpu = query.get("gpu") ?? "",
    fam = query.get("family") ?? "",
    branch = query.get("branch") ?? "";
  const filters = { case: query.get("case") ?? "", status: query.get("status") ?? "" };
  const overviewQuery = (page) => {
    const q = pageQuery(query);
    if (page) q.set("page", page);
    for (const [key, value] of Object.entries({ gpu, branch, ...filters })) if (value) q.set(key, value);
    return q;
  };
  const [overview, runs, branches, settings, audit] = await Promise.all([
    api(`/api/v1/projects/${enc(project)}/overview?${overviewQuery()}`),
    api(`/api/v1/projects/${enc(project)}/runs?limit=10${branch ? `&branch=${enc(branch)}` : ""}`),
    branchSelect(project, branch),
    api(`/api/v1/projects/${enc(project)}`),
    api(`/api/v1/projects/${enc(project)}/audit`),
  ]);
  app.innerHTML = overviewHeader({
    project,
    branch,
    gpu,
    fam,
    filters,
    overview,
    runs,
    branches,
    settings,
    audit,
  });
  const box = document.getElementById("overview-box"),
    table = document.getElementById("overview");
  const draw = (answer) => {
    const rows = answer.cases.filter((c) => !fam || family(c.case) === fam);
    const linked = overviewQuery(answer.paging.page);
    if (fam) linked.set("family", fam);
    document.getElementById("case-pager").innerHTML =
      pager(answer.paging, linked) ||
      (rows.length ? "" : `<p class="muted" id="no-cases">no case matches</p>`);
    virtualRows(box, rows, (c) => caseRow(project, branch, c));
    table.dataset.rows = rows.length;
    table.dataset.filter = `${filters.case}|${filters.status}`;
  };
  draw(overview);
  listenToFilters({ project, branch, gpu, fam, filters, overviewQuery, draw });
}

// The cases whose last test could not see a change of their threshold's
// size nine times in ten: the gate does not really guard them.
function undetectableSummary(overview) {
  if (!overview.undetectable) return "";
  return `<p id="undetectable" class="undetectable">${overview.undetectable} case(s) cannot see their threshold: the smallest slowdown their last test flags nine times in ten is above it (the "sees" column). <a href="#" id="show-undetectable">list them</a></p>`;
}

// The page around the cases' table: filters, the audit, the newest runs.
function overviewHeader({ project, branch, gpu, fam, filters, overview, runs, branches, settings, audit }) {
  const families = [...new Set(overview.cases.map((c) => family(c.case)))].sort();
  return `<h1>${esc(project)}</h1>${notificationTargets(settings.notification_targets ?? [])}
    <div class="filters">
      ${branches}
      <label>GPU model <select id="gpu"><option value="">all</option>${overview.gpu_models.map((g) => `<option ${g === gpu ? "selected" : ""}>${esc(g)}</option>`).join("")}</select></label>
      <label>kernel family <select id="family"><option value="">all</option>${families.map((f) => `<option ${f === fam ? "selected" : ""}>${esc(f)}</option>`).join("")}</select></label>
      <a href="#/compare?project=${enc(project)}">compare two commits</a>
    </div>${auditSummary(audit)}${undetectableSummary(overview)}${recentRuns(project, runs)}
    <h2>Cases${branch ? ` on ${esc(branch)}` : ""}</h2>
    <div class="filters">
      <label>search <input id="case-search" type="search" size="36" placeholder="text, or a glob: attention.fwd/*/s4096*" value="${esc(filters.case)}"></label>
      <label>status <select id="status">${statusOptions(filters.status)}</select></label>
    </div>
    <div id="case-pager"></div>
    <div class="virtual-table" id="overview-box"><table id="overview"><thead><tr><th></th><th>case</th><th>GPU</th><th class="num">median</th><th class="num">speedup vs in-run baseline</th>
      <th class="num">change vs previous baseline</th><th class="num" title="the smallest slowdown the case's last test flags nine times in ten">sees</th><th>last 30 runs</th></tr></thead><tbody></tbody></table></div>`;
}

function listenToFilters({ project, branch, gpu, fam, filters, overviewQuery, draw }) {
  // Search and status ask the server again and redraw the table alone; the
  // URL keeps them (replaced, not pushed: no history entry per keystroke).
  // An answer that a newer request overtook is dropped.
  let asked = 0;
  const refilter = async () => {
    const ticket = ++asked;
    const q = overviewQuery(1);
    history.replaceState(
      null,
      "",
      `#/p/${enc(project)}?${new URLSearchParams([...q].filter(([k]) => k !== "page"))}${fam ? `&family=${enc(fam)}` : ""}`,
    );
    app.dataset.ready = location.hash;
    const answer = await api(`/api/v1/projects/${enc(project)}/overview?${q}`);
    if (ticket === asked) draw(answer);
  };
  document.getElementById("case-search").oninput = (e) => {
    filters.case = e.target.value.trim();
    refilter();
  };
  document.getElementById("status").onchange = (e) => {
    filters.status = e.target.value;
    refilter();
  };
  const listUndetectable = document.getElementById("show-undetectable");
  if (listUndetectable)
    listUndetectable.onclick = (e) => {
      e.preventDefault();
      filters.status = document.getElementById("status").value = "undetectable";
      refilter();
    };
  document.getElementById("branch").onchange = (e) =>
    setQuery({ branch: e.target.value, gpu, family: fam, ...filters });
  document.getElementById("gpu").onchange = (e) =>
    setQuery({ branch, gpu: e.target.value, family: fam, ...filters });
  document.getElementById("family").onchange = (e) =>
    setQuery({ branch, gpu, family: e.target.value, ...filters });
}
