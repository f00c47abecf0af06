// One case over time: its time and energy charts, with a card per point.
import { cardPinned, hideCard, panZoomPlugin, pinCard, plot, showCard } from "../charts.js";
import { api, app, branchSelect, enc, esc, setQuery, short, us, when } from "../lib.js";

const COLORS = ["#2e90fa", "#7a5af8", "#12a150", "#f79009"];

// The page around the charts: filters, then each chart or the line that says why it is not drawn.
// What the gate saw of the case in its newest judged run: the smallest
// slowdown that test flags nine times in ten, against the threshold.
function detectableLine(series) {
  const k = (series.detectable ?? []).findLastIndex((d) => d != null);
  if (k < 0) return "";
  const d = series.detectable[k],
    t = series.threshold[k];
  return `<p id="detectable" class="${d > t ? "undetectable" : "muted"}">The newest judged run (${esc(series.gpu_model[k])}, run ${series.run_id[k]}) sees slowdowns of ${(100 * d).toFixed(1)}% or more nine times in ten; its threshold is ${(100 * t).toFixed(1)}%${d > t ? ": a change of the threshold's size can pass unseen" : ""}.</p>`;
}

function caseHeader({ project, name, gpu, where, gpus, branches, n, impls, hasEnergy, detectable }) {
  const gpuOptions = gpus
    .concat(gpu && !gpus.includes(gpu) ? [gpu] : [])
    .map((g) => `<option ${g === gpu ? "selected" : ""}>${esc(g)}</option>`)
    .join("");
  const time = n
    ? `<h2>Median time (µs) with 95% interval</h2><div class="chart" id="time-chart"></div>`
    : `<p class="muted" id="no-runs">No run of this case on ${esc(where)}${gpu ? ` on ${esc(gpu)}` : ""} yet.</p>`;
  const speedup =
    n && impls.length
      ? `<h2>Speedup over the in-run baselines</h2><div class="chart" id="speedup-chart"></div>`
      : n
        ? `<p class="muted" id="no-baselines">No speedup to chart: this case's bench measures no in-run baseline (a cuDNN or cuBLAS implementation run beside it).</p>`
        : "";
  const energy = hasEnergy
    ? `<h2>Energy per iteration (mJ)</h2><div class="chart" id="energy-chart"></div>`
    : n
      ? `<p class="muted" id="no-energy">No energy to chart: no run measured it (kernelwatch.json <code>full_bench.energy_seconds</code>, on a GPU whose NVML reads energy).</p>`
      : "";
  return `<h1>${esc(name)} <span class="muted">· <a href="#/p/${enc(project)}">${esc(project)}</a></span></h1>
    <div class="filters">${branches}<label>GPU model <select id="gpu"><option value="">all</option>${gpuOptions}</select></label>
    <span class="muted">${n} runs on ${esc(where)}, in commit order · drag to pan, wheel to zoom, click a point to pin its card</span></div>
    ${detectable}${time}${speedup}${energy}`;
}

// Each GPU model's median with its interval as a band, the base's level
// where a branch has one, and the regressions marked.
function timeChartData(series, gpus, x) {
  const timeSeries = [{ label: "commit", value: (u, v) => (v == null ? "–" : short(series.commit[v])) }],
    timeData = [x],
    bands = [];
  for (const g of gpus) {
    const own = (k) => series.gpu_model[k] === g;
    const base = timeData.length;
    timeData.push(
      series.median_ns.map((m, k) => (own(k) ? m.candidate / 1000 : null)),
      series.band_ns.map((b, k) => (own(k) && b.candidate ? b.candidate[0] / 1000 : null)),
      series.band_ns.map((b, k) => (own(k) && b.candidate ? b.candidate[1] / 1000 : null)),
    );
    timeSeries.push(
      { label: g, stroke: COLORS[(bands.length / 2) % 4], width: 1.5, spanGaps: true, points: { size: 4 } },
      { label: `${g} low`, stroke: "transparent", spanGaps: true, points: { show: false } },
      { label: `${g} high`, stroke: "transparent", spanGaps: true, points: { show: false } },
    );
    bands.push(
      { series: [base + 2, base + 1], fill: "rgba(46,144,250,0.15)" },
      { series: [base, base + 1], fill: "rgba(0,0,0,0)" },
    );
  }
  // A branch's runs against their base: the base commit's level, dashed.
  const baseLevel = (series.base_ns ?? []).map((b) => (b == null ? null : b / 1000));
  if (baseLevel.some((b) => b != null)) {
    timeData.push(baseLevel);
    timeSeries.push({
      label: "base",
      stroke: "#667085",
      dash: [6, 4],
      width: 1.5,
      spanGaps: true,
      points: { size: 3 },
    });
  }
  const mark = (want) =>
    series.median_ns.map((m, k) =>
      series.status[k] === "regression" && series.acknowledged[k] === want ? m.candidate / 1000 : null,
    );
  timeData.push(mark(false), mark(true));
  timeSeries.push(markers("regression", "#d92d20"), markers("acknowledged", "#f79009"));
  return { timeSeries, timeData, bands };
}

// Points only, no line: the runs a status marks.
function markers(label, color) {
  return { label, stroke: color, paths: () => null, points: { size: 11, fill: color, stroke: color } };
}

// The card of run k: its commit, what it measured and where it links.
function pointCard(series, settings, k) {
  const commit = series.commit[k],
    m = series.median_ns[k],
    energy = series.energy_j ?? [];
  const github = settings.github_repo
    ? ` · <a href="https://github.com/${esc(settings.github_repo)}/commit/${esc(commit)}" target="_blank" rel="noopener">commit on GitHub</a>`
    : "";
  return `<div class="card-commit"><code>${esc(short(commit))}</code> ${esc(series.subject[k] ?? "")}</div>
      <div class="card-meta">${series.author[k] ? `${esc(series.author[k])} · ` : ""}${series.committed_at[k] != null ? `committed ${when(series.committed_at[k])}` : `measured ${when(series.finished_at[k])}`}</div>
      <div>${esc(series.gpu_model[k])} · median ${us(m.candidate)} · ${esc(series.status[k] ?? "no comparison")}${series.acknowledged[k] ? " (acknowledged)" : ""}</div>
      ${series.detectable?.[k] != null ? `<div class="card-detectable${series.detectable[k] > series.threshold[k] ? " undetectable" : ""}">sees slowdowns of ${(100 * series.detectable[k]).toFixed(1)}% or more (threshold ${(100 * series.threshold[k]).toFixed(1)}%)</div>` : ""}
      ${energy[k] != null ? `<div class="card-energy">${(1000 * energy[k]).toPrecision(4)} mJ per iteration at ${Math.round(series.power_w[k])} W · energy ${esc(series.energy_status[k] ?? "not compared")}</div>` : ""}
      <div class="card-links"><a class="card-run" href="#/run/${series.run_id[k]}">run ${series.run_id[k]} →</a>${github}</div>`;
}

// What every chart of the page shares: its width, pan and zoom, and the
// card of the point under the cursor (pinned by a click).
function chartOptions(series, settings) {
  const width = Math.min(1300, app.clientWidth - 20);
  const hover = (u) => {
    if (cardPinned()) return;
    const k = u.cursor.idx;
    if (k == null || u.cursor.left < 0) {
      hideCard();
      return;
    }
    const rect = u.over.getBoundingClientRect();
    showCard(pointCard(series, settings, k), rect.left + u.cursor.left, rect.top + u.cursor.top);
  };
  const ready = (u) => {
    u.over.addEventListener("click", () => {
      if (u.cursor.idx != null) pinCard(() => hover(u));
    });
    u.over.addEventListener("mouseleave", () => {
      if (!cardPinned()) hideCard();
    });
  };
  return (height) => ({
    width,
    height,
    plugins: [panZoomPlugin()],
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: false } },
    hooks: { setCursor: [hover], ready: [ready] },
  });
}

function energyChart(series, gpus, x, options, commitAxis, commitSeries) {
  const energy = series.energy_j ?? [];
  const energyData = [x],
    energySeries = [commitSeries];
  gpus.forEach((g, i) => {
    energyData.push(energy.map((e, k) => (series.gpu_model[k] === g && e != null ? 1000 * e : null)));
    energySeries.push({ label: g, stroke: COLORS[i % 4], width: 1.5, spanGaps: true, points: { size: 4 } });
  });
  energyData.push(
    energy.map((e, k) => (series.energy_status[k] === "regression" && e != null ? 1000 * e : null)),
  );
  energySeries.push(markers("more energy", "#d92d20"));
  const chart = plot(
    document.getElementById("energy-chart"),
    { ...options(240), series: energySeries, axes: [commitAxis, { label: "mJ" }] },
    energyData,
  );
  chart.root.dataset.points = String(energy.filter((e) => e != null).length);
}

function speedupChart(series, impls, x, options, commitAxis, commitSeries) {
  const speedupData = [
    x,
    ...impls.map((impl) =>
      series.median_ns.map((m) => (m[impl] && m.candidate ? m[impl] / m.candidate : null)),
    ),
  ];
  const speedupSeries = impls.map((impl, i) => ({
    label: impl.replace("baseline:", "vs "),
    stroke: ["#12a150", "#7a5af8", "#f79009"][i % 3],
    spanGaps: true,
    width: 1.5,
  }));
  plot(
    document.getElementById("speedup-chart"),
    { ...options(240), axes: [commitAxis, { label: "x" }], series: [commitSeries, ...speedupSeries] },
    speedupData,
  );
}

export async function casePage(project, name, query) {
  const gpu = query.get("gpu") ?? "",
    branch = query.get("branch") ?? "";
  const [series, settings, branches] = await Promise.all([
    api(
      `/api/v1/projects/${enc(project)}/series?case=${enc(name)}&gpu=${enc(gpu)}&branch=${enc(branch)}&limit=10000`,
    ),
    api(`/api/v1/projects/${enc(project)}`),
    branchSelect(project, branch),
  ]);
  const n = series.run_id.length;
  const gpus = [...new Set(series.gpu_model)];
  const where = branch || settings.default_branch;
  // A chart is drawn only where it has something to show; otherwise a line says why.
  const impls = [
    ...new Set(series.median_ns.flatMap((m) => Object.keys(m)).filter((i) => i !== "candidate")),
  ];
  const hasEnergy = (series.energy_j ?? []).some((e) => e != null);
  app.innerHTML = caseHeader({
    project,
    name,
    gpu,
    where,
    gpus,
    branches,
    n,
    impls,
    hasEnergy,
    detectable: detectableLine(series),
  });
  document.getElementById("branch").onchange = (e) => setQuery({ branch: e.target.value, gpu });
  document.getElementById("gpu").onchange = (e) => setQuery({ branch, gpu: e.target.value });
  if (!n) return;
  // One point per run, in commit order: the axis is the commits, labelled by short SHA.
  const x = series.run_id.map((_, k) => k);
  const commitAxis = {
    space: 80,
    incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000],
    values: (u, splits) =>
      splits.map((v) => (Number.isInteger(v) && v >= 0 && v < n ? short(series.commit[v]) : "")),
  };
  const options = chartOptions(series, settings);
  const { timeSeries, timeData, bands } = timeChartData(series, gpus, x);
  const timeChart = plot(
    document.getElementById("time-chart"),
    { ...options(320), series: timeSeries, bands, axes: [commitAxis, { label: "µs" }] },
    timeData,
  );
  timeChart.root.dataset.points = String(n);
  if (hasEnergy) energyChart(series, gpus, x, options, commitAxis, timeSeries[0]);
  if (impls.length) speedupChart(series, impls, x, options, commitAxis, timeSeries[0]);
}
