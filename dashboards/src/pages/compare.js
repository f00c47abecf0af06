// Two commits compared, per GPU model.
import {
  api,
  app,
  badge,
  enc,
  esc,
  intervalText,
  pageQuery,
  pager,
  ratioText,
  statusOptions,
} from "../lib.js";

export async function comparePage(query) {
  const project = query.get("project") ?? "",
    base = query.get("base") ?? "",
    head = query.get("head") ?? "";
  const cases = query.get("case") ?? "",
    status = query.get("status") ?? "";
  app.innerHTML = `<h1>Compare two commits</h1>
    <form class="compare" id="compare-form">
      <label>project <input name="project" value="${esc(project)}"></label>
      <label>base commit <input name="base" value="${esc(base)}" placeholder="SHA, its first 7+ digits, or a branch"></label>
      <label>head commit <input name="head" value="${esc(head)}" placeholder="SHA, its first 7+ digits, or a branch"></label>
      <label>cases <input name="case" value="${esc(cases)}" placeholder="text, or a glob"></label>
      <label>status <select name="status">${statusOptions(status)}</select></label>
      <button type="submit">compare</button>
    </form><div id="compare-result"></div>`;
  document.getElementById("compare-form").onsubmit = (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const q = new URLSearchParams([...f].filter(([, v]) => v));
    location.hash = `#/compare?${q}`;
  };
  if (!base || !head) return;
  const q = pageQuery(query);
  for (const [key, value] of Object.entries({ base, head, project, case: cases, status }))
    if (value) q.set(key, value);
  const result = await api(`/api/v1/compare?${q}`);
  document.getElementById("compare-result").innerHTML = result.gpus.length
    ? result.gpus
        .map(
          (
            g,
          ) => `<h2>${esc(g.gpu_model)}: <a href="#/run/${g.head_run_id}">run ${g.head_run_id}</a> vs ${g.source === "in_job" ? "its base, measured in the same job" : `<a href="#/run/${g.base_run_id}">run ${g.base_run_id}</a>`}</h2>
        <p class="muted compare-source" data-source="${esc(g.source ?? "")}">${g.source === "in_job" ? "In-job A/B" : "Cross-run"}: ${esc(g.source_note ?? "")}</p>
        ${pager(g.paging, q)}<table id="compare-table"><thead><tr><th>case</th><th>status</th><th class="num">ratio (head / base)</th><th class="num">99% interval</th><th class="num">p</th><th class="num">threshold</th></tr></thead><tbody>
        ${g.cases
          .map(
            (
              c,
            ) => `<tr><td>${esc(c.case)}</td><td>${badge(c.status)}</td><td class="num">${ratioText(c.ratio)}</td>
          <td class="num">${intervalText(c.lower, c.upper)}</td><td class="num">${c.p_value != null ? c.p_value.toExponential(1) : "–"}</td>
          <td class="num threshold" title="${esc(c.threshold_source ?? "")}">${c.threshold != null ? (100 * c.threshold).toFixed(1) + "%" : "–"}</td></tr>`,
          )
          .join("")}</tbody></table>`,
        )
        .join("")
    : '<p class="muted">No GPU model has runs of both commits, nor a run of the head that measured the base.</p>';
}
