// A job before its report.
import { api, app, badge, enc, esc, rerender } from "../lib.js";

// A job before its report: the stages its agent streamed, each as it starts
// and ends, a failed one with the end of its log. The page polls until the
// report lands, then shows the run.
let jobPoll = null;

// A sharded job's shards: each a job of its own on one GPU, its stage now.
function shardTable(shards) {
  const rows = shards
    .map((s) => {
      const now = (s.stages ?? []).at(-1);
      const stage = now ? `${now.name} ${now.status}` : "–";
      const gpu = s.gpu ? `${s.gpu.model ?? ""} #${s.gpu.index ?? "?"}` : "–";
      return `<tr data-shard="${s.index}"><td>${s.index} of ${shards.length}</td><td>${badge(s.state === "done" ? "passed" : s.state === "failed" ? "failed" : "pending", s.state)}</td>
      <td>${esc(s.agent ?? "–")}</td><td>${esc(gpu)}</td><td class="num">${s.attempts}</td><td class="num">${s.cases ?? "–"}</td><td>${esc(s.error ?? stage)}</td></tr>`;
    })
    .join("");
  return `<h2>Shards</h2><table id="job-shards"><thead><tr><th>shard</th><th>state</th><th>agent</th><th>GPU</th><th class="num">attempts</th><th class="num">cases</th><th>now</th></tr></thead><tbody>${rows}</tbody></table>`;
}

export async function jobPage(id) {
  const job = await api(`/api/v1/jobs/${enc(id)}`);
  if (job.run_id) {
    location.replace(`#/run/${job.run_id}`);
    return;
  }
  const stages = job.stages ?? [];
  const rows = stages
    .map(
      (
        s,
      ) => `<tr data-stage="${esc(s.name)}"><td>${esc(s.name)}</td><td>${badge(s.status === "started" ? "pending" : s.status, s.status === "started" ? "running" : s.status)}</td>
      <td class="num">${s.duration_ms != null && s.status !== "skipped" ? (s.duration_ms / 1000).toFixed(1) + " s" : "–"}</td><td>${esc(s.status === "passed" ? "" : (s.message ?? ""))}</td></tr>`,
    )
    .join("");
  const failed = stages.find((s) => s.status === "failed");
  app.innerHTML = `<h1>Job ${job.id} ${badge(job.state === "failed" ? "failed" : "pending", job.state)}</h1>
    <div class="card"><dl class="meta"><dt>project</dt><dd>${esc(job.project)}</dd><dt>commit</dt><dd><code>${esc(job.commit)}</code></dd>
    ${job.profile ? `<dt>profile</dt><dd>${esc(job.profile.case)} of <a href="#/run/${job.profile.run_id}">run ${job.profile.run_id}</a> under Nsight Compute</dd>` : ""}
    <dt>agent</dt><dd>${esc(job.agent ?? "–")}</dd><dt>attempts</dt><dd>${job.attempts} of ${job.max_attempts}</dd>${job.error ? `<dt>error</dt><dd>${esc(job.error)}</dd>` : ""}</dl></div>
    ${
      job.shard_jobs
        ? shardTable(job.shard_jobs)
        : job.kind === "profile"
          ? ""
          : `<h2>Stages</h2>${
              stages.length
                ? `<table id="job-stages"><thead><tr><th>stage</th><th>status</th><th class="num">time</th><th>message</th></tr></thead><tbody>${rows}</tbody></table>`
                : '<p class="muted">No stage has started yet.</p>'
            }`
    }
    ${failed && failed.log_tail ? `<h2>${esc(failed.name)}: end of its log</h2><pre class="log">${esc(failed.log_tail)}</pre>` : ""}`;
  if (job.state === "queued" || job.state === "running") {
    const hash = location.hash;
    clearTimeout(jobPoll);
    jobPoll = setTimeout(() => {
      if (location.hash === hash) rerender();
    }, 2000);
  }
}
