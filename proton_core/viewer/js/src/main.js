// The page of `proton-view --html`: the profile (a JSON block the Python side writes into the page)
// drawn as an icicle / flame graph by d3-flame-graph, with a metric chooser, search, zoom (click a
// frame; "Reset zoom"), a tooltip with every metric of a frame, and red/blue colouring by the change
// when the page shows a diff.  Everything is in the page: it works offline.
import flamegraph, { tooltip, colorMapper } from "d3-flame-graph";
import { select } from "d3-selection";
import libraryCss from "../node_modules/d3-flame-graph/dist/d3-flamegraph.css";

const PAGE_CSS = `
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 4px}
.proton-sub{color:#555;font-size:13px;margin-bottom:10px}
.proton-controls{display:flex;gap:12px;align-items:center;flex-wrap:wrap;margin-bottom:8px;font-size:13px}
.proton-controls input[type=search]{width:260px}
#proton-details{font-size:13px;color:#333;min-height:1.4em;margin:4px 0 8px}
.proton-legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 10px;vertical-align:middle}
.d3-flame-graph-tip{font-size:12px;max-width:640px;word-break:break-all;opacity:.92!important;pointer-events:none!important}
.d3-flame-graph-tip table{border-collapse:collapse;margin-top:4px}
.d3-flame-graph-tip td{padding:0 8px 0 0}
`;

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "-";
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
  return v.toLocaleString("en-US", { maximumFractionDigits: 3 });
}

// Flat arrays (parent, name index) to the nested objects d3-flame-graph takes, without recursion.
function buildTree(data) {
  const n = data.parent.length;
  const nodes = new Array(n);
  for (let i = 0; i < n; i++) nodes[i] = { name: data.names[data.name[i]], i, v: 0, d: 0, children: [] };
  for (let i = 1; i < n; i++) nodes[data.parent[i]].children.push(nodes[i]);
  return { root: nodes[0], nodes };
}

function main() {
  const data = JSON.parse(document.getElementById("proton-data").textContent);
  const app = document.getElementById("proton-app");
  const style = document.createElement("style");
  style.textContent = libraryCss + PAGE_CSS;
  document.head.appendChild(style);

  const { root, nodes } = buildTree(data);
  let metric = 0;

  app.innerHTML = `
    <h1>${escapeHtml(data.title)}</h1>
    <div class="proton-sub">${escapeHtml(data.subtitle)}</div>
    <div class="proton-controls">
      <label>width by <select id="proton-metric"></select></label>
      <label>view <select id="proton-layout"><option value="icicle">icicle (root on top)</option>
        <option value="flame">flame (root at the bottom)</option></select></label>
      <input id="proton-search" type="search" placeholder="search frames (substring)">
      <button id="proton-reset" type="button">Reset zoom</button>
      ${data.diff ? `<span class="proton-legend">change:<span style="background:rgb(220,0,0)"></span>more
        <span style="background:rgb(0,0,220)"></span>less<span style="background:rgb(220,220,220)"></span>same</span>` : ""}
    </div>
    <div id="proton-details"></div>
    <div id="proton-chart"></div>`;

  const chooser = document.getElementById("proton-metric");
  data.metrics.forEach((name, k) => {
    const option = document.createElement("option");
    option.value = String(k);
    option.textContent = name;
    chooser.appendChild(option);
  });

  const details = document.getElementById("proton-details");
  const share = (d) => (root.__total ? (100 * d.value) / root.__total : 0).toFixed(2);
  const tip = tooltip.defaultFlamegraphTooltip().html((d) => {
    const i = d.data.i;
    let rows = `<tr><td>share of the view</td><td>${share(d)}% of ${escapeHtml(data.metrics[metric])}</td></tr>`;
    if (data.diff) rows += `<tr><td>change</td><td>${formatNumber(d.delta)}</td></tr>`;
    data.tips.forEach((name, t) => {
      rows += `<tr><td>${escapeHtml(name)}</td><td>${formatNumber(data.tip[t][i])}</td></tr>`;
    });
    return `<b>${escapeHtml(d.data.name)}</b><table>${rows}</table>`;
  });

  const width = Math.max(480, app.clientWidth || window.innerWidth - 32);
  const chart = flamegraph()
    .width(width)
    .cellHeight(18)
    .inverted(true)
    .selfValue(true)
    .sort(false)
    .minFrameSize(1)
    .resetHeightOnZoom(true)
    .transitionDuration(300)
    .tooltip(tip)
    .setDetailsElement(details)
    .setLabelHandler((d) => `${d.data.name}: ${formatNumber(d.value)} ${data.metrics[metric]} (${share(d)}%)`)
    .setSearchMatch((d, term) => Boolean(term) && d.data.name.toLowerCase().includes(term.toLowerCase()))
    .setSearchHandler((results, sum, total) => {
      details.textContent = results.length
        ? `${results.length} frames match: ${formatNumber(sum)} of ${formatNumber(total)} (${((100 * sum) / (total || 1)).toFixed(2)}%)`
        : "no frame matches";
    });
  if (data.diff) chart.computeDelta(true).setColorMapper(colorMapper.differentialColorMapper);

  function setValues(k) {
    metric = k;
    const values = data.value[k];
    const deltas = data.delta ? data.delta[k] : null;
    let total = 0;
    for (const node of nodes) {
      node.v = values[node.i] || 0;
      if (deltas) node.d = deltas[node.i] || 0;
      total += node.v;
    }
    root.__total = total;
  }

  function show(k) {
    setValues(k);
    chart.update(root);
  }

  setValues(0);
  select("#proton-chart").datum(root).call(chart);

  chooser.addEventListener("change", () => show(Number(chooser.value)));
  document.getElementById("proton-layout").addEventListener("change", (e) => {
    chart.inverted(e.target.value === "icicle");
    chart.update();
  });
  document.getElementById("proton-search").addEventListener("input", (e) => {
    if (e.target.value) chart.search(e.target.value);
    else chart.clear();
  });
  document.getElementById("proton-reset").addEventListener("click", () => chart.resetZoom());

  // For scripts and tests: what is drawn.
  window.protonView = {
    chart,
    metrics: data.metrics,
    show,
    frames: () => Array.from(document.querySelectorAll("#proton-chart g.frame")).map((g) => g.getAttribute("name")),
  };
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
else main();
