// A run's comparisons as the run and compare pages show them.
import { badge, esc, intervalText, ratioText } from "./lib.js";

// How the run was judged: the false-alarm rate over its candidate
// comparisons, the noise prior, and whether the baselines moved together.
export function decisionSummary(run) {
  const d = run.detection;
  if (!d) return "";
  const prior = d.noise_prior;
  const drift = d.machine_drift;
  const inconclusive = run.inconclusive
    ? ` <strong id="inconclusive">${run.inconclusive} inconclusive</strong>: moved past the threshold, but the interval holds no change; a re-run with more replicates decides.`
    : "";
  const f = run.fingerprints;
  const identical =
    f && (f.identical_to_base || f.audited)
      ? ` <span id="identical">${f.identical_to_base} case(s) run code identical to the base's and were not timed${f.audited ? `; ${f.audited} identical case(s) audited (timed anyway), ${f.audit_misses} flagged` : ""}.</span>`
      : "";
  const blind = run.undetectable
    ? ` <strong id="undetectable">${run.undetectable} case(s) cannot see their threshold</strong>: the smallest slowdown their test flags nine times in ten ("sees") is above it, with this run's noise and replicates.`
    : "";
  return `<div class="card" id="decision"><p>Judged on ${d.comparisons} candidate comparison(s), at most ${(100 * d.run_alpha).toFixed(1)}% chance of any false flag in the run (Holm).${inconclusive}${blind}${identical}
    ${prior ? `Noise on ${esc(prior.gpu_model)}: between replicates ${(100 * prior.replicate_sd).toFixed(2)}% (${Math.round(prior.replicate_df)} df), between runs ${(100 * prior.run_sd).toFixed(2)}% (${Math.round(prior.run_df)} df).` : ""}</p>
    ${drift ? `<p id="machine-drift" class="${drift.flagged ? "mismatch" : "muted"}">${drift.flagged ? "Machine drift: " : ""}the baseline implementations moved ${ratioText(1 + drift.median_change)} (median of ${drift.comparisons}, ${drift.same_direction} the same way)${drift.flagged ? ": the GPU or its libraries changed, not only this commit" : ""}.</p>` : ""}</div>`;
}

// "1.3%": the smallest slowdown the case's test flags nine times in ten;
// one above the case's threshold is a change the gate cannot guard.
export function detectableText(c) {
  return c.detectable != null ? `${(100 * c.detectable).toFixed(c.detectable < 0.1 ? 1 : 0)}%` : "–";
}

export function comparisonTable(rows) {
  if (!rows?.length) return '<p class="muted">No comparisons.</p>';
  return `<table class="comparisons"><thead><tr><th>case</th><th>kind</th><th>implementation</th><th>status</th><th class="num">ratio</th><th class="num">99% interval</th><th class="num">p</th><th class="num">threshold</th><th class="num" title="the smallest slowdown this test flags nine times in ten, with this run's noise and replicates">sees</th><th>baseline</th><th>note</th></tr></thead><tbody>
    ${rows
      .map(
        (
          c,
        ) => `<tr><td>${esc(c.case)}</td><td>${esc(c.kind)}</td><td>${esc(c.impl ?? "")}</td><td>${badge(c.status)}</td><td class="num">${ratioText(c.ratio)}</td>
      <td class="num">${intervalText(c.lower, c.upper)}</td><td class="num">${c.p_value != null ? c.p_value.toExponential(1) : "–"}</td>
      <td class="num threshold" title="${esc(c.threshold_source ?? "")}">${c.threshold != null ? (100 * c.threshold).toFixed(1) + "%" : "–"}</td>
      <td class="num detectable${c.detectable != null && c.threshold != null && c.detectable > c.threshold ? " undetectable" : ""}">${detectableText(c)}</td>
      <td>${c.baseline_run_id ? `<a href="#/run/${c.baseline_run_id}">${esc(c.baseline_reason)}</a>` : esc(c.baseline_reason ?? "")}</td>
      <td class="muted">${esc(c.note)}${c.changed?.length ? `<br><span class="changed">changed from the base: ${esc(c.changed.join("; "))}</span>` : ""}${c.first_pass ? `<br><span class="first-pass">first pass: ${ratioText(c.first_pass.ratio)}, p ${c.first_pass.p_value.toExponential(1)} on ${c.first_pass.head_replicates} + ${c.first_pass.base_replicates} replicates; measured again</span>` : ""}</td></tr>`,
      )
      .join("")}</tbody></table>`;
}
