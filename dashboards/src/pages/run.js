// One run: flagged cases first, stages, comparisons, explanations, profiles
// and the acknowledgement form.
import { plot } from "../charts.js";
import { comparisonTable, decisionSummary } from "../comparisons.js";
import {
  NeedsToken,
  api,
  app,
  badge,
  enc,
  esc,
  intervalText,
  pageQuery,
  pager,
  ratioText,
  rerender,
  short,
  us,
  when,
} from "../lib.js";

// Each flagged case in numbers, first on the run page: base and head medians
// with their spread, the ratio and its interval, the speedup against each
// baseline on each side, and where the why and the profile are.
function flaggedCases(run) {
  const rows = run.flagged ?? [];
  if (!rows.length) return "";
  const spread = (noise) =>
    noise == null ? "" : ` <span class="muted">± ${(100 * noise).toFixed(1)}%</span>`;
  // The base's level: measured in the job, else the head's over the ratio.
  const baseNs = (f) => {
    if (f.base_ns != null) return f.base_ns;
    const r = Number.isFinite(f.ratio_of_medians) && f.ratio_of_medians > 0 ? f.ratio_of_medians : f.ratio;
    return f.head_ns && r ? f.head_ns / r : null;
  };
  const speedups = (f) =>
    Object.keys(f.head_baselines ?? {})
      .map((impl) => {
        const head = f.head_ns ? f.head_baselines[impl] / f.head_ns : null;
        const base = f.base_baselines?.[impl] && f.base_ns ? f.base_baselines[impl] / f.base_ns : null;
        return `${esc(impl.replace("baseline:", "vs "))} ${base != null ? `${base.toPrecision(3)}x → ` : ""}${head != null ? `${head.toPrecision(3)}x` : "–"}`;
      })
      .join("<br>") || '<span class="muted">no reference implementation (cuDNN, cuBLAS) in this bench</span>';
  const profiled = new Set((run.profiles ?? []).map((p) => p.case));
  return `<div class="card" id="flagged"><table id="flagged-table"><thead><tr><th>flagged case</th><th></th><th class="num">base</th><th class="num">head</th>
    <th class="num">head / base</th><th class="num">99% interval</th><th>speedup, base → head</th><th>why</th></tr></thead><tbody>
    ${rows
      .map(
        (f) => `<tr data-case="${esc(f.case)}"><td>${esc(f.case)}</td><td>${badge(f.status)}</td>
      <td class="num base-time">${us(baseNs(f))}${spread(f.base_noise)}${f.base_ns == null && f.baseline_run_id ? `<br><a class="muted" href="#/run/${f.baseline_run_id}" title="${esc(f.baseline_reason ?? "")}">stored run ${f.baseline_run_id}</a>` : ""}</td>
      <td class="num head-time">${us(f.head_ns)}${spread(f.head_noise)}</td>
      <td class="num">${ratioText(f.ratio)}</td><td class="num">${intervalText(f.lower, f.upper)}</td>
      <td>${speedups(f)}</td>
      <td class="why"><a href="" data-scroll="explanation">explanation</a>${profiled.has(f.case) ? ' · <a href="" data-scroll="profiles">profile</a>' : ""}</td></tr>`,
      )
      .join("")}
    </tbody></table></div>`;
}

// The stages in the order they ran, each as wide as its wall time; the
// darker part is the time its bench processes held the GPU.
function stageTimeline(stages, onGpu = true) {
  const total = stages.reduce((sum, s) => sum + s.duration_ms, 0);
  if (total <= 0) return "";
  let offset = 0;
  const bars = stages
    .map((s) => {
      const left = (100 * offset) / total,
        width = (100 * s.duration_ms) / total;
      offset += s.duration_ms;
      const gpu = s.gpu_seconds ?? null;
      const gpuShare =
        gpu === null || s.duration_ms <= 0 ? 0 : Math.min(100, (100 * gpu * 1000) / s.duration_ms);
      const title = `${s.name}: ${(s.duration_ms / 1000).toFixed(1)} s${gpu === null || !onGpu ? "" : `, ${gpu.toFixed(1)} s on the GPU`} (${s.status})`;
      return `<div class="stage-bar ${esc(s.status)}" style="left:${left}%;width:${width}%" title="${esc(title)}">
      <div class="gpu" style="width:${gpuShare}%"></div><span>${esc(s.name)}</span></div>`;
    })
    .join("");
  return `<div id="timeline" class="timeline">${bars}</div>
    <p class="muted">${(total / 1000).toFixed(1)} s from the start of the build to the report${onGpu ? "; darker: on the GPU" : ""}</p>`;
}

// The run's facts: project, commit, GPU, agent, time, acknowledgement, bisect.
function runFacts(run, cpu) {
  const git = run.git
    ? `<br><span id="commit-subject">${esc(run.git.subject ?? "")}</span> <span class="muted">· ${esc(run.git.author ?? "")}${run.git.committed_at ? ` · ${when(run.git.committed_at)}` : ""}</span>`
    : "";
  const device = cpu
    ? `<dt>CPU</dt><dd>${esc(run.gpu_model)}${run.device.sm_count ? ` · ${run.device.sm_count} cores` : ""} (no GPU: a CPU benchmark)</dd>`
    : `<dt>GPU</dt><dd>${esc(run.gpu_model)}${run.device ? ` · CC ${esc(run.device.compute_capability)} · driver ${esc(run.device.driver)} · ${run.device.sm_count} SMs` : ""}</dd>`;
  return `<div class="card"><dl class="meta">
      <dt>project</dt><dd><a href="#/p/${enc(run.project)}">${esc(run.project)}</a></dd>
      <dt>commit</dt><dd><code>${esc(run.commit)}</code> on ${esc(run.branch)}${run.base_commit ? ` (base <code>${esc(run.base_commit.slice(0, 12))}</code>)` : ""}
        ${git}</dd>
      ${device}
      <dt>agent</dt><dd>${esc(run.agent.name)} ${esc(run.agent.version)}</dd>
      <dt>${cpu ? "bench seconds" : "GPU-seconds"}</dt><dd>${run.gpu_seconds.toFixed(1)}</dd>
      <dt>started</dt><dd>${esc(run.started_at)}</dd>
      ${run.acknowledgement ? `<dt>acknowledged</dt><dd id="acknowledgement">${acknowledgementText(run.acknowledgement)}</dd>` : ""}
      ${run.bisect ? `<dt>bisect</dt><dd id="bisect">${bisectText(run.bisect)}</dd>` : ""}
    </dl></div>`;
}

// The stages as a timeline and a table, open when one failed.
function preflightChecklist(run, cpu) {
  const icon = { passed: "✔", failed: "✘", skipped: "–" };
  const allPassed = run.stages.every((s) => s.status !== "failed");
  const rows = run.stages
    .map(
      (
        s,
      ) => `<tr><td>${icon[s.status]}</td><td>${esc(s.name)}</td><td>${badge(s.status)}</td><td class="num">${(s.duration_ms / 1000).toFixed(1)} s</td>
      ${cpu ? "" : `<td class="num">${s.gpu_seconds == null ? "" : `${s.gpu_seconds.toFixed(1)} s`}</td>`}
      <td>${esc(s.message)}${s.log_tail ? `<details><summary>log tail</summary><pre class="log">${esc(s.log_tail)}</pre></details>` : ""}</td></tr>`,
    )
    .join("");
  return `<details id="preflight"${allPassed ? "" : " open"}><summary><h2>Preflight checklist</h2> <span class="muted">${allPassed ? `no stage failed (${run.stages.length} stages)` : "a stage failed"}</span></summary>
    ${stageTimeline(run.stages, !cpu)}
    <table id="stages"><thead><tr><th></th><th>stage</th><th>status</th><th class="num">duration</th>${cpu ? "" : '<th class="num">on the GPU</th>'}<th>message</th></tr></thead><tbody>
    ${rows}
    </tbody></table></details>`;
}

// What changed in the flagged cases' launches and build, each case's first change beside its numbers.
async function showExplanation(run, id, cpu) {
  const flagged = run.comparisons.some(
    (c) => c.impl === "candidate" && (c.status === "regression" || c.status === "improvement"),
  );
  if (!run.flagged?.length && !flagged) return;
  const explained = await api(`/api/v1/runs/${enc(id)}/explanation`);
  document.getElementById("explanation").innerHTML = explanation(explained, cpu);
  for (const c of explained.cases) {
    const why = [...document.querySelectorAll("#flagged-table tr[data-case]")]
      .find((row) => row.dataset.case === c.case)
      ?.querySelector(".why");
    if (why && c.changes.length) why.insertAdjacentHTML("afterbegin", `${esc(c.changes[0])}<br>`);
  }
}

async function showProfiles(run, id) {
  if (run.device?.kind === "cpu" || run.gpu_model === "none") return;
  document.getElementById("profiles").innerHTML = profiles(
    await api(`/api/v1/runs/${enc(id)}/profiles`),
    run,
  );
  document.getElementById("profile-form").onsubmit = (e) =>
    postWithCiToken(
      e,
      `/api/v1/runs/${run.id}/profiles`,
      (f) => ({ case: String(f.get("case")), launch_count: Number(f.get("launch_count")) }),
      "profile-error",
      "not queued",
    );
}

async function showCompareLink(run) {
  const baselineRun = run.comparisons.find((c) => c.baseline_run_id)?.baseline_run_id;
  if (!baselineRun) return;
  const baseline = await api(`/api/v1/runs/${baselineRun}?per_page=1`);
  document.getElementById("compare-link").innerHTML =
    `<a id="compare-baseline" href="#/compare?project=${enc(run.project)}&base=${baseline.commit}&head=${run.commit}">compare every case with the baseline run ${baselineRun} (${esc(baseline.commit.slice(0, 12))})</a>`;
}

// A case's card: the launch it must make and those it made, its correctness,
// the GPU's state, and its measurements.
function caseCard(c, i) {
  const e = c.expected_launch;
  const launches = c.launches
    .map((l) => {
      const blockBad = e && e.block && JSON.stringify(e.block) !== JSON.stringify(l.block);
      const gridBad = e && e.grid && JSON.stringify(e.grid) !== JSON.stringify(l.grid);
      return `<tr><td><code>${esc(l.kernel)}</code></td><td class="${gridBad ? "mismatch" : ""}">${esc(l.grid.join("×"))}</td>
        <td class="${blockBad ? "mismatch" : ""}">${esc(l.block.join("×"))}</td><td class="num">${l.registers}</td><td class="num">${l.static_smem + l.dynamic_smem}</td></tr>`;
    })
    .join("");
  const g = c.gpu_state;
  const measurements = c.measurements
    .map(
      (m) =>
        `<tr><td>${esc(m.impl)}</td><td class="num">${us(m.median_ns)}</td><td class="num">${m.samples_ns.length}</td><td class="num">${m.throttled_samples.length}</td><td class="num">${m.peak_mem_bytes != null ? (m.peak_mem_bytes / 2 ** 20).toFixed(1) + " MiB" : "–"}</td></tr>`,
    )
    .join("");
  return `<h3>${esc(c.name)}</h3>
      ${e ? `<p>expected: <code>${esc(e.kernel_pattern)}</code> ${e.block ? `block ${esc(e.block.join("×"))}` : "block as its autotuner picks"}${e.grid ? ` grid ${esc(e.grid.join("×"))}` : ""}</p>` : ""}
      ${launches ? `<table><thead><tr><th>observed kernel</th><th>grid</th><th>block</th><th class="num">registers</th><th class="num">shared bytes</th></tr></thead><tbody>${launches}</tbody></table>` : ""}
      ${c.correctness ? `<p>correctness ${badge(c.correctness.passed ? "passed" : "failed")} rel L2 ${c.correctness.rel_l2_err.toExponential(2)} · max abs ${c.correctness.max_abs_err.toExponential(2)} · tolerance ${c.correctness.tolerance} · non-finite ${c.correctness.nonfinite}</p>` : ""}
      ${g ? `<p class="muted">SM ${esc(g.sm_mhz.join(" → "))} MHz · memory ${esc(g.mem_mhz.join(" → "))} MHz · throttle reasons 0x${Number(g.throttle_reasons).toString(16)}${g.temp_c_max != null ? ` · ${g.temp_c_max} °C max` : ""}${g.power_w_max != null ? ` · ${g.power_w_max} W max` : ""}</p>` : ""}
      ${
        c.measurements.length
          ? `<table><thead><tr><th>implementation</th><th class="num">median</th><th class="num">samples</th><th class="num">throttled</th><th class="num">peak memory</th></tr></thead><tbody>
        ${measurements}
        </tbody></table><div class="chart samples" id="samples-${i}"></div>`
          : ""
      }`;
}

// Every sample of each implementation, in the order taken.
function samplesChart(c, i) {
  const colors = ["#2e90fa", "#12a150", "#7a5af8", "#f79009"];
  const longest = Math.max(...c.measurements.map((m) => m.samples_ns.length));
  plot(
    document.getElementById(`samples-${i}`),
    {
      width: Math.min(900, app.clientWidth - 40),
      height: 200,
      scales: { x: { time: false } },
      axes: [{ label: "sample (in the order taken)" }, { label: "µs" }],
      series: [
        {},
        ...c.measurements.map((m, k) => ({
          label: m.impl,
          stroke: colors[k % 4],
          paths: () => null,
          points: { size: 4, fill: colors[k % 4] },
        })),
      ],
    },
    [
      Array.from({ length: longest }, (_, k) => k),
      ...c.measurements.map((m) =>
        Array.from({ length: longest }, (_, k) => (k < m.samples_ns.length ? m.samples_ns[k] / 1000 : null)),
      ),
    ],
  );
}

export async function runPage(id, query) {
  const run = await api(`/api/v1/runs/${enc(id)}?${pageQuery(query)}`);
  const verdict = run.acknowledgement ? badge("acknowledged", "pass (acknowledged)") : badge(run.verdict);
  // A CPU run (Google Benchmark on a host without a GPU) has no GPU to name,
  // time on, launch or profile.
  const cpu = run.device?.kind === "cpu";
  app.innerHTML = `<h1>Run ${run.id} ${verdict}</h1>
    ${decisionSummary(run)}${flaggedCases(run)}
    ${runFacts(run, cpu)}${run.verdict === "regression" && !run.acknowledgement ? ackForm() : ""}
    ${preflightChecklist(run, cpu)}
    <h2>Comparisons</h2><p id="compare-link"></p>${pager(run.paging, query)}${comparisonTable(run.comparisons)}
    <div id="explanation"></div><div id="profiles"></div>
    <h2>Cases</h2><div id="cases"></div>${pager(run.paging, query)}`;
  const form = document.getElementById("ack");
  if (form)
    form.onsubmit = (e) =>
      postWithCiToken(
        e,
        `/api/v1/runs/${run.id}/acknowledge`,
        (f) => ({ reason: String(f.get("reason")).trim() }),
        "ack-error",
        "not acknowledged",
      );
  for (const link of document.querySelectorAll("[data-scroll]")) {
    link.onclick = (e) => {
      e.preventDefault();
      document.getElementById(link.dataset.scroll)?.scrollIntoView();
    };
  }
  await showExplanation(run, id, cpu);
  await showProfiles(run, id);
  await showCompareLink(run);
  const container = document.getElementById("cases");
  run.cases.forEach((c, i) => {
    const div = document.createElement("div");
    div.className = "card";
    div.innerHTML = caseCard(c, i);
    container.appendChild(div);
    if (c.measurements.length) samplesChart(c, i);
  });
}

// What changed between a flagged case's baseline run and this run: the
// kernels launched and how, their occupancy, the build's spills.
function explanation(e, cpu = false) {
  if (!e.cases.length) return "";
  const launchRows = (side, label) =>
    (side?.launches ?? [])
      .map((l) => {
        const spill = side.build.find((b) => b.kernel === l.kernel);
        const o = l.occupancy;
        return `<tr><td>${label}</td><td><code>${esc(l.kernel)}</code></td><td>${esc(l.grid.join("×"))}</td><td>${esc(l.block.join("×"))}</td>
      <td class="num">${l.registers}</td><td class="num">${(l.shared_bytes / 1024).toFixed(1)} KB</td>
      <td class="num">${o ? `${Math.round(100 * o.fraction)}% <span class="muted">(${o.blocks_per_sm} blocks, ${esc(o.limited_by)})</span>` : "–"}</td>
      <td class="num">${spill ? `${spill.spill_stores} / ${spill.spill_loads}` : "–"}</td></tr>`;
      })
      .join("");
  return `<h2>What changed in the flagged cases</h2>${e.cases
    .map(
      (c) => `<div class="card explained" data-case="${esc(c.case)}">
    <h3>${esc(c.case)} ${badge(c.status)} ${ratioText(c.ratio)}</h3>
    ${c.changes.length ? `<ul class="changes">${c.changes.map((line) => `<li>${esc(line)}</li>`).join("")}</ul>` : ""}
    ${c.note && !cpu ? `<p class="muted">${esc(c.note)}</p>` : ""}
    ${
      c.base && !cpu
        ? `<table><thead><tr><th></th><th>kernel</th><th>grid</th><th>block</th><th class="num">registers</th><th class="num">shared / block</th><th class="num">theoretical occupancy</th><th class="num">spill stores / loads (bytes)</th></tr></thead>
      <tbody>${launchRows(c.base, `base <a href="#/run/${c.base.run_id}">${esc(short(c.base.commit))}</a>`)}${launchRows(c.head, "head")}</tbody></table>`
        : ""
    }</div>`,
    )
    .join("")}`;
}

// Nsight Compute profiles of the run's cases: per kernel, base against head,
// its time, SM and memory throughput, achieved occupancy and top warp stalls;
// a form queues one (it needs a ci token, as acknowledging does).
function profiles(list, run) {
  const fmt = (v, digits = 1) => (v == null ? "–" : v.toFixed(digits));
  const table = (p) => {
    const sides = ["base", "head"].filter((side) => p.summary[side]);
    const kernels = [...new Set(sides.flatMap((side) => Object.keys(p.summary[side].kernels)))];
    const rows = kernels
      .flatMap((kernel) =>
        sides.map((side) => {
          const k = p.summary[side].kernels[kernel];
          const label = `${side} <code>${esc(short(p.summary[side].commit))}</code>`;
          if (!k)
            return `<tr><td><code>${esc(kernel)}</code></td><td>${label}</td><td class="num">0</td><td colspan="5" class="muted">not launched</td></tr>`;
          return `<tr data-side="${side}"><td><code>${esc(kernel)}</code></td><td>${label}</td><td class="num">${k.launches}</td><td class="num">${fmt(k.time_us)} µs</td>
        <td class="num">${fmt(k.sm_pct)}%</td><td class="num">${fmt(k.memory_pct)}%</td><td class="num">${fmt(k.occupancy_pct)}%</td>
        <td>${k.stalls.map((st) => `${esc(st.reason)} ${st.cycles_per_issue.toFixed(2)}`).join(", ")}</td></tr>`;
        }),
      )
      .join("");
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
  if (b.state === "found")
    return `first bad commit <code>${esc(short(b.first_bad))}</code> ${where}${b.message?.includes(", or one of") ? ` <span class="muted">${esc(b.message)}</span>` : ""}`;
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
  const f = new FormData(e.target),
    error = document.getElementById(errorId);
  const token = String(f.get("token")).trim();
  try {
    await api(path, { method: "POST", payload: payloadOf(f), token });
    sessionStorage.setItem(CI_TOKEN_KEY, token);
    await rerender();
  } catch (failure) {
    error.hidden = false;
    error.textContent = `${failed}: ${failure instanceof NeedsToken ? failure.message : failure.message.replace(/^[^:]*: /, "")}`;
  }
}
