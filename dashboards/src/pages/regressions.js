// Every run of a project that flagged a regression.
import {
  api,
  app,
  branchSelect,
  commitCell,
  enc,
  esc,
  intervalText,
  ratioText,
  setQuery,
  verdictBadge,
  when,
} from "../lib.js";

// Every run that flagged a regression, newest first, each with the cases it
// flagged; an acknowledged one stays, marked, with who and why on its page.
export async function regressionsPage(project, query) {
  const branch = query.get("branch") ?? "";
  const [runs, branches] = await Promise.all([
    api(`/api/v1/projects/${enc(project)}/regressions?limit=200${branch ? `&branch=${enc(branch)}` : ""}`),
    branchSelect(project, branch),
  ]);
  app.innerHTML = `<h1>Regressions <span class="muted">· <a href="#/p/${enc(project)}">${esc(project)}</a></span></h1>
    <div class="filters">${branches}
      <span class="muted">${runs.length} run(s) flagged, ${runs.filter((r) => !r.acknowledged).length} not acknowledged</span></div>
    ${
      runs.length
        ? `<table id="regressions"><thead><tr><th>run</th><th>status</th><th>branch</th><th>commit</th><th>GPU</th><th>cases flagged (time vs baseline, 99% interval)</th><th>finished</th></tr></thead><tbody>
      ${runs
        .map(
          (
            r,
          ) => `<tr class="clickable" data-href="#/run/${r.id}"><td><a href="#/run/${r.id}">${r.id}</a></td><td>${verdictBadge(r)}</td><td>${esc(r.branch)}</td>
        <td>${commitCell(r)}</td><td>${esc(r.gpu_model)}</td>
        <td>${(r.regressions ?? []).map((c) => `${esc(c.case)}${c.kind === "energy" ? " (energy)" : ""} <b>${ratioText(c.ratio)}</b> <span class="muted">[${intervalText(c.lower, c.upper, ", ")}]</span>`).join("<br>")}</td>
        <td>${when(r.finished_at)}</td></tr>`,
        )
        .join("")}</tbody></table>`
        : `<p class="muted" id="no-regressions">No run of ${esc(project)}${branch ? ` on ${esc(branch)}` : ""} has flagged a regression.</p>`
    }`;
  document.getElementById("branch").onchange = (e) => setQuery({ branch: e.target.value });
}
