// kernelwatch dashboard: hash-routed pages over the kw-server API, charts by
// uPlot. Every selection lives in the URL (#/p/PROJECT?gpu=..., #/run/ID, ...)
// so links are deep and back/forward work.
import { clearCharts, unpinCard } from "./charts.js";
import { NeedsToken, TOKEN_KEY, app, esc, loginPage, onRender, parseHash, signOut } from "./lib.js";
import { agentsPage } from "./pages/agents.js";
import { casePage } from "./pages/case.js";
import { comparePage } from "./pages/compare.js";
import { jobPage } from "./pages/job.js";
import { overviewPage } from "./pages/overview.js";
import { projectsPage } from "./pages/projects.js";
import { regressionsPage } from "./pages/regressions.js";
import { runPage } from "./pages/run.js";

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

document.getElementById("sign-out").onclick = (e) => {
  e.preventDefault();
  signOut();
};

window.addEventListener("hashchange", route);

onRender(route);
route();
