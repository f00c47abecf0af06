// uPlot charts: the live ones (destroyed on navigation, read by the browser
// tests), pan and zoom, and the hover card of a chart point.
import uPlot from "./vendor/uPlot.esm.js";

const tooltip = document.getElementById("tooltip");

const charts = []; // live uPlot instances, destroyed on navigation

window.kwCharts = charts; // the browser tests read what was drawn

export function clearCharts() {
  while (charts.length) charts.pop().destroy();
}

// Wheel zooms the x range, drag pans it (uPlot leaves interaction to plugins).
export function panZoomPlugin() {
  return {
    hooks: {
      ready: (u) => {
        const over = u.over;
        let dragX = null,
          dragMin = 0,
          dragMax = 0;
        over.addEventListener(
          "wheel",
          (e) => {
            e.preventDefault();
            const { min, max } = u.scales.x;
            const at = u.posToVal(e.offsetX, "x");
            const factor = e.deltaY < 0 ? 0.8 : 1.25;
            u.setScale("x", { min: at - (at - min) * factor, max: at + (max - at) * factor });
          },
          { passive: false },
        );
        over.addEventListener("mousedown", (e) => {
          if (e.button !== 0) return;
          dragX = e.clientX;
          dragMin = u.scales.x.min;
          dragMax = u.scales.x.max;
        });
        window.addEventListener("mouseup", () => {
          dragX = null;
        });
        window.addEventListener("mousemove", (e) => {
          if (dragX == null) return;
          const per = ((dragMax - dragMin) / u.bbox.width) * devicePixelRatio;
          const dx = (e.clientX - dragX) * per;
          u.setScale("x", { min: dragMin - dx, max: dragMax - dx });
        });
      },
    },
  };
}

export function plot(el, opts, data) {
  const chart = new uPlot(opts, data, el);
  charts.push(chart);
  return chart;
}

// The hover card of a chart point: the commit (short SHA, subject, author,
// when), what was measured, and links. A click pins it so its links can be
// followed; Escape or a click elsewhere lets it go.
let pinnedCard = false;

export function showCard(html, x, y) {
  tooltip.innerHTML = html;
  tooltip.hidden = false;
  tooltip.style.left = Math.min(x + 14, window.innerWidth - tooltip.offsetWidth - 8) + "px";
  tooltip.style.top = y + 14 + "px";
}

export function hideCard() {
  tooltip.hidden = true;
}
export const cardPinned = () => pinnedCard;
// Shows the card `show` draws and keeps it until Escape or a click elsewhere.
export function pinCard(show) {
  pinnedCard = false;
  show();
  pinnedCard = true;
  tooltip.classList.add("pinned");
}
export function unpinCard() {
  pinnedCard = false;
  tooltip.classList.remove("pinned");
  tooltip.hidden = true;
}

document.addEventListener("keydown", (e) => {
  if (e.key === "Escape") unpinCard();
});

document.addEventListener("click", (e) => {
  if (pinnedCard && !e.target.closest("#tooltip, .u-over")) unpinCard();
});
