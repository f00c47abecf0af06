// Builds dist/: the pages from src/ and uPlot from node_modules (installed by
// npm ci from package-lock.json). No network, no bundler.
import { cpSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, "dist");
const uplot = join(root, "node_modules", "uplot", "dist");
if (!existsSync(uplot)) {
  console.error("dashboards: node_modules/uplot is missing; run `npm ci` in dashboards/");
  process.exit(1);
}
rmSync(dist, { recursive: true, force: true });
mkdirSync(join(dist, "vendor"), { recursive: true });
cpSync(join(root, "src"), dist, { recursive: true });
cpSync(join(uplot, "uPlot.esm.js"), join(dist, "vendor", "uPlot.esm.js"));
cpSync(join(uplot, "uPlot.min.css"), join(dist, "vendor", "uPlot.min.css"));
console.log("dashboards: built", dist);
