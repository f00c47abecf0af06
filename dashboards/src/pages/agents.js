// The GPU hosts and their health.
import { api, app, badge, esc, short, when } from "../lib.js";

// The GPU hosts: each worker of a multi-GPU host is an agent of its own,
// pinned to one GPU. An unhealthy one claims nothing; its failed checks say why.
export async function agentsPage() {
  const agents = await api("/api/v1/agents");
  const gpuCell = (a) =>
    a.gpu
      ? `GPU ${a.gpu.index} · ${esc(a.gpu.model)}<br><code class="muted">${esc(a.gpu.uuid)}</code>`
      : esc((a.gpus ?? []).join(", ") || "no GPU");
  const healthCell = (a) => {
    if (!a.health) return '<span class="muted">not checked</span>';
    const failed = a.health.checks.filter((c) => !c.passed);
    if (!failed.length)
      return `<span title="${esc(a.health.checks.map((c) => `${c.name}: ${c.message}`).join("\n"))}">healthy</span>`;
    return failed.map((c) => `<span class="mismatch">${esc(c.name)}: ${esc(c.message)}</span>`).join("<br>");
  };
  const stateBadge = { running: "pending", idle: "pass", unhealthy: "failed", offline: "no-data" };
  app.innerHTML = `<h1>Agents</h1>
    ${
      agents.length
        ? `<table id="agents"><thead><tr><th>agent</th><th>host</th><th>GPU</th><th>state</th><th>health</th><th>job</th><th>last seen</th></tr></thead><tbody>
      ${agents
        .map(
          (
            a,
          ) => `<tr data-agent="${esc(a.name)}" data-state="${esc(a.state)}"><td>${esc(a.name)}</td><td>${esc(a.host)} <span class="muted">kw ${esc(a.version)}</span></td><td>${gpuCell(a)}</td>
        <td>${badge(stateBadge[a.state] ?? "no-data", a.state)}</td><td>${healthCell(a)}</td>
        <td>${a.job ? `<a href="#/job/${a.job.id}">job ${a.job.id}</a> <span class="muted">${esc(a.job.project)} <code>${esc(short(a.job.commit))}</code> ${esc(a.job.branch)}</span>` : "–"}</td>
        <td>${when(a.last_seen_at)}</td></tr>`,
        )
        .join("")}</tbody></table>`
        : '<p class="muted">No agent has claimed a job yet: start <code>kw agent</code> on a GPU host.</p>'
    }`;
}
