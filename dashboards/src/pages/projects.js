// The projects this server tracks.
import { api, app, enc, esc } from "../lib.js";

export async function projectsPage() {
  const projects = await api("/api/v1/projects");
  app.innerHTML = `<h1>Projects</h1><table><thead><tr><th>project</th><th>default branch</th><th class="num">runs</th><th>last run</th></tr></thead><tbody>
    ${projects
      .map(
        (
          p,
        ) => `<tr class="clickable" data-href="#/p/${enc(p.name)}"><td><a href="#/p/${enc(p.name)}">${esc(p.name)}</a></td>
      <td>${esc(p.default_branch)}</td><td class="num">${p.runs}</td><td>${esc(p.last_run_at ?? "–")}</td></tr>`,
      )
      .join("")}
    </tbody></table>${projects.length ? "" : '<p class="muted">No runs yet: point an agent at this server or post a report.</p>'}`;
}
