// proton-view --html of a distributed run: under the flame graph, one bar per rank for the selected
// frame (click a frame; the root at first), its value of the compared metric, the slowest rank marked.
// Plain script beside the bundle: it reads the same JSON block, nothing else.
(function () {
  "use strict";
  function start() {
    const data = JSON.parse(document.getElementById("proton-data").textContent);
    const ranks = data.ranks;
    if (!ranks) return;
    const panel = document.createElement("div");
    panel.id = "proton-ranks";
    panel.style.cssText = "font:13px system-ui,sans-serif;margin-top:12px";
    document.body.appendChild(panel);
    const fmt = (v) => (v === null || v === undefined ? "-" : v.toLocaleString("en-US", { maximumFractionDigits: 3 }));
    const esc = (t) => String(t).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
    let selected = 0;
    function show(i) {
      selected = i;
      const values = ranks.values.map((col) => col[i]);
      const top = Math.max(0, ...values.filter((v) => v !== null));
      let html = `<b>per rank: ${esc(ranks.metric)} of ${esc(data.names[data.name[i]])}</b>`;
      html += `<table id="proton-rank-bars" style="border-collapse:collapse;margin-top:4px">`;
      values.forEach((v, r) => {
        const width = top > 0 && v ? Math.max(1, Math.round((400 * v) / top)) : 0;
        const slowest = top > 0 && v === top;
        html += `<tr data-rank="${ranks.ranks[r]}"><td style="padding-right:8px">rank ${ranks.ranks[r]}</td>` +
          `<td style="width:410px"><div class="proton-rank-bar" style="height:12px;width:${width}px;` +
          `background:${slowest ? "#d62728" : "#1f77b4"}"></div></td><td>${fmt(v)}${slowest ? " (slowest)" : ""}</td></tr>`;
      });
      panel.innerHTML = html + "</table>";
    }
    document.addEventListener("click", (e) => {
      const frame = e.target.closest && e.target.closest("#proton-chart g.frame");
      if (frame && frame.__data__ && frame.__data__.data) show(frame.__data__.data.i);
    });
    show(0);
    window.protonRanks = { show, selected: () => selected, values: (i) => ranks.values.map((col) => col[i]) };
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
