// lbplane dashboard: plain JavaScript, no dependencies. Every value from the server goes into the page as
// text (textContent / attributes), never as HTML.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
let selected = decodeURIComponent(location.hash.slice(1));
let source = null;
let lastHealth = null; // every endpoint's health as text, to fetch the history when it changes
let lastProxies = null;

function el(tag, attrs, ...children) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// pct prints a fraction (0 to 1) as a percentage with one decimal, "-" when unset; ms a latency in
// milliseconds as lbctl does ("77ms", "5.5ms", "1.23s").
function pct(f) { return f == null ? "-" : (100 * f).toFixed(1) + "%"; }
function ms(v) { return v == null ? "-" : v >= 1000 ? +(v / 1000).toFixed(2) + "s" : +v.toFixed(1) + "ms"; }

function fill(tbody, rows) {
  tbody.replaceChildren(...rows.map(r => el("tr", {}, ...r.map(c => c instanceof Node ? el("td", {}, c) : el("td", {}, c ?? "")))));
}

// logEvent notes a change of an Envoy's sync state, as this page saw it.
function logEvent(text, cls) {
  const list = document.getElementById("proxy-events");
  list.prepend(el("li", { class: cls || "" }, new Date().toLocaleTimeString() + "  " + text));
  while (list.children.length > 200) list.lastChild.remove();
}

// healthOf is the counted view of an endpoint and, when the Envoys disagree, what the others say (one Envoy's
// report counts for everyone only with a majority).
function healthOf(ep, proxies) {
  const of = ep.reportedBy || proxies, why = (ep.reasons || []).join("; ");
  if (ep.health === "Unknown") return "unknown since " + new Date(ep.unknownSince).toLocaleTimeString() + " (passive checks only: no request answered since its ejection lapsed)";
  if (!(ep.ejectedOn > 0)) return "healthy";
  if (ep.health === "Ejected") return "ejected on " + ep.ejectedOn + " of " + of + (ep.ejectedOn < of ? " (Envoys disagree)" : "") + ": " + why;
  return "healthy on " + (of - ep.ejectedOn) + " of " + of + " (Envoys disagree; ejected on " + ep.ejectedOn + ": " + why + ")";
}

function stateOf(ep) {
  if (ep.health === "Ejected") return "ejected";
  if (ep.health === "Unknown") return "unknown";
  return ep.ejectedOn > 0 ? "disputed" : "healthy";
}

function renderPolicies(policies) {
  const ul = document.getElementById("policies");
  if (!selected && policies.length) selected = policies[0].namespace + "/" + policies[0].name;
  ul.replaceChildren(...policies.map(p => {
    const key = p.namespace + "/" + p.name;
    const conds = p.status.conditions || [];
    const bad = conds.filter(c => c.status !== "True").map(c => c.type);
    const ep = p.status.endpoints || {};
    // Degraded: endpoints not healthy (ejected or unknown), or Envoys that disagree on some.
    const degraded = [];
    if (ep.total > 0 && ep.healthy < ep.total) degraded.push(ep.healthy + "/" + ep.total + " healthy");
    if (ep.mismatched > 0) degraded.push("Envoys disagree on " + ep.mismatched);
    const text = bad.length ? "not " + bad.join(", not ") : degraded.length ? "degraded: " + degraded.join(", ") : "ok";
    const li = el("li", { "data-policy": key, "data-degraded": degraded.length ? "true" : "false", class: key === selected ? "selected" : "" }, key + " ",
      el("span", { class: bad.length ? "bad" : degraded.length ? "degraded" : "ok" }, text));
    li.addEventListener("click", () => select(key));
    return li;
  }));
}

function renderProxies(proxies) {
  fill(document.querySelector("#proxies tbody"), proxies.map(p =>
    [p.nodeId, p.group, el("span", { class: p.state, "data-node": p.nodeId }, p.state), p.message || ""]));
  const now = new Map(proxies.map(p => [p.nodeId, p.state + (p.message ? ": " + p.message : "")]));
  if (lastProxies) {
    for (const [n, s] of now) if (lastProxies.get(n) !== s) logEvent("envoy " + n + " " + s, s.startsWith("NACKED") ? "bad" : "");
    for (const n of lastProxies.keys()) if (!now.has(n)) logEvent("envoy " + n + " disconnected", "bad");
  }
  lastProxies = now;
}

function renderConditions(p) {
  fill(document.querySelector("#conditions tbody"), ((p && p.status.conditions) || []).map(c =>
    [c.type, el("span", { class: c.status }, c.status), c.reason, c.message]));
}

// renderRollout shows a staged rollout: its phase and stage, which Envoys of the group run which generation,
// and the last analysis of the canaries against the other Envoys.
function renderRollout(p, proxies) {
  const box = document.getElementById("rollout");
  const r = p && p.status.rollout;
  if (!r) { box.replaceChildren(); return; }
  const canaries = new Set(r.canaries || []);
  const split = r.phase === "Progressing" || r.phase === "Paused";
  // A traffic shift runs the candidate (with the step's weights) on every Envoy.
  const onCandidate = n => r.phase === "Succeeded" || (split && (!!r.trafficBackend || canaries.has(n)));
  const envoys = (proxies || []).filter(x => x.group === p.group);
  const stages = el("ol", { class: "stages" }, ...Array.from({ length: r.stages }, (_, i) =>
    el("li", { class: i + 1 < r.stage || r.phase === "Succeeded" ? "passed" : i + 1 === r.stage ? "current " + r.phase : "" }, "stage " + (i + 1))));
  const gens = el("table", { class: "rollout-envoys" }, el("thead", {}, el("tr", {}, ...["envoy", "generation"].map(h => el("th", {}, h)))), el("tbody"));
  fill(gens.querySelector("tbody"), envoys.map(x => [x.nodeId,
    el("span", { class: onCandidate(x.nodeId) ? "candidate" : "baseline", "data-node": x.nodeId },
      onCandidate(x.nodeId) ? r.candidateGeneration + " (candidate)" : r.baselineGeneration + " (baseline)")]));
  const nums = (name, n) => n ? [name, n.envoys, n.requests, n.errors, pct(n.errorRate), ms(n.latencyP99Ms)] : [name, "-", "-", "-", "-", "-"];
  const analysis = el("table", { class: "rollout-analysis" }, el("thead", {}, el("tr", {},
    ...["", "envoys", "requests", "errors", "error rate", "p99"].map(h => el("th", {}, h)))), el("tbody"));
  fill(analysis.querySelector("tbody"), r.trafficBackend ? [nums(r.trafficBackend, r.canary), nums("other backends", r.baseline)]
    : [nums("canaries", r.canary), nums("others", r.baseline)]);
  box.replaceChildren(el("h3", {}, "Rollout ", el("span", { class: r.phase === "RolledBack" || r.phase === "Aborted" ? "bad" : "ok", "data-phase": r.phase }, r.phase),
    el("span", { class: "muted" }, " generation " + r.candidateGeneration + " over " + r.baselineGeneration +
      (r.trafficBackend ? " · traffic shift to " + r.trafficBackend + (r.trafficPercent != null ? " at " + r.trafficPercent + " %" : "") : ""))),
    stages, el("p", { class: "rollout-message" }, r.message || ""), gens, analysis);
}

// chart draws one horizontal bar per endpoint: its observed share of the backend's requests, with a tick at
// the share the traffic model expects, and the counts, zone, level and backup marker as text.
function chart(b, algorithm) {
  const eps = b.perEndpoint || [];
  const rowH = 26, left = 170, width = 360, right = 560;
  const svg = el("svg:svg", { width: left + width + right, height: rowH * eps.length + 8, class: "spread", "data-backend": b.name });
  eps.forEach((e, i) => {
    const y = i * rowH + 4;
    const obs = 100 * (e.observedShare || 0), exp = 100 * (e.expectedShare || 0);
    const state = stateOf(e);
    const g = el("svg:g", { class: "ep " + state, "data-endpoint": e.address, "data-state": state, "data-requests": e.requests });
    g.append(el("svg:text", { x: 0, y: y + 16, class: "ep-address" }, e.address));
    const where = [e.zone, e.priority ? "level " + e.priority : "", e.backup ? "backup" : ""].filter(Boolean).join(" · ");
    g.append(el("svg:rect", { class: "bar", x: left, y: y + 3, height: rowH - 8, width: Math.max(1, width * obs / 100) }));
    if (exp > 0) g.append(el("svg:line", { class: "expected", x1: left + width * exp / 100, x2: left + width * exp / 100, y1: y, y2: y + rowH - 2 }));
    const t = el("svg:text", { x: left + width + 8, y: y + 16 });
    t.append(el("svg:tspan", { class: "ep-requests" }, String(e.requests)), " req · ",
      el("svg:tspan", { class: "ep-share" }, pct(e.observedShare)), " (exp " + pct(e.expectedShare) + ") · " +
      (e.requestsPerSecond || 0).toFixed(1) + " rps · " + e.activeRequests + " active" + (e.errorRate != null ? " · err " + pct(e.errorRate) : "") +
      (where ? " · " : ""), where ? el("svg:tspan", { class: "ep-where" }, where) : "", " · ",
      el("svg:tspan", { class: "ep-state " + state }, state));
    g.append(t);
    svg.append(g);
  });
  const head = el("h4", {}, b.name + " ",
    el("span", { class: "muted" }, b.requests + " requests in " + (b.windowSeconds || 0) + " s · p99 " + ms(b.latencyP99Ms) +
      " (per backend: Envoy keeps no latency per endpoint) · " + b.endpoints.healthy + "/" + b.endpoints.total + " healthy" +
      (b.skew != null ? " · skew " + b.skew.toFixed(2) : "")));
  const box = el("div", { class: "backend" }, head, svg);
  // What the expected shares leave out, as lbctl trace, whatif and diff --traffic say it.
  if ((b.expectedCaveats || []).length) {
    box.append(el("ul", { class: "caveats muted", "data-backend": b.name },
      ...b.expectedCaveats.map(c => el("li", { class: "caveat" }, "not predicted: " + c))));
  }
  // Each Envoy's own view: its ejections count for everyone only with a majority; a mismatch is flagged.
  if ((b.perProxy || []).length > 1 || (b.mismatches || []).length) {
    const t = el("table", { class: "per-envoy", "data-backend": b.name }, el("thead", {}, el("tr", {},
      ...["envoy", "endpoints", "healthy", "ejected", "agrees"].map(h => el("th", {}, h)))), el("tbody"));
    fill(t.querySelector("tbody"), (b.perProxy || []).map(r => [r.node, r.endpoints.total, r.endpoints.healthy, r.endpoints.ejected,
      el("span", { class: r.mismatch ? "bad" : "ok", "data-node": r.node }, r.mismatch ? "no" : "yes")]));
    box.append(t);
  }
  if ((b.mismatches || []).length)
    box.append(el("p", { class: "bad mismatch" }, "The Envoys disagree on " + b.mismatches.length + " endpoint(s): " +
      b.mismatches.map(m => m.address + " ejected on " + m.ejectedOn.join(", ") + ", healthy on " + (m.healthyOn || []).join(", ") +
        " (counted " + (m.counted ? "ejected" : "healthy") + ")").join("; ")));
  if (b.skew != null && b.skew >= 0.33 && (algorithm === "RingHash" || algorithm === "Maglev"))
    box.append(el("p", { class: "bad" }, "High skew for a hash backend: a few hash keys carry most requests" +
      (algorithm === "RingHash" ? ", or the ring is too small (raise ringHash.minimumRingSize, or use Maglev)." : ".")));
  return box;
}

function renderLive(state) {
  const chartBox = document.getElementById("chart");
  const perProxy = document.getElementById("per-proxy");
  const p = state.policies.find(x => x.namespace + "/" + x.name === selected);
  renderConditions(p);
  renderRollout(p, state.proxies);
  const backends = (state.live && state.live.backends) || [];
  if (!p || !backends.length) {
    chartBox.replaceChildren(el("p", { class: "muted" }, p ? noReport(p.group, state.proxies) : "No such policy."));
    perProxy.replaceChildren();
    return;
  }
  chartBox.replaceChildren(...backends.map(b => chart(b, p.algorithms[b.name])));
  const rows = [];
  for (const px of state.live.proxies || [])
    for (const b of px.backends || [])
      for (const e of b.perEndpoint || [])
        rows.push([px.nodeId, b.name, e.address, e.requests, (e.requestsPerSecond || 0).toFixed(1), e.activeRequests, pct(e.observedShare),
          el("span", { class: e.ejectedOn > 0 ? "ejected" : "ok" }, healthOf(e, 1))]);
  const t = el("table", {}, el("thead", {}, el("tr", {}, ...["envoy", "backend", "endpoint", "requests", "rps", "active", "share", "health"].map(h => el("th", {}, h)))), el("tbody"));
  fill(t.querySelector("tbody"), rows);
  perProxy.replaceChildren(t);
  // A change of health: the server has logged it; show its history now rather than at the next refresh.
  const now = backends.map(b => (b.perEndpoint || []).map(e => b.name + " " + e.address + " " + healthOf(e, b.proxies)).join("\n")).join("\n");
  if (lastHealth !== null && lastHealth !== now) loadHistory();
  lastHealth = now;
}

// noReport says why a policy has no backend figures, from the group's Envoys as they are connected.
function noReport(group, proxies) {
  const mine = (proxies || []).filter(x => x.group === group);
  if (!mine.length) return "No Envoy of group " + group + " is connected.";
  const withPort = mine.filter(x => x.statsPort > 0);
  if (!withPort.length) return "The Envoys of group " + group + " have no stats port (lbctl bootstrap --stats-port), so none reports endpoint health.";
  return "Waiting for the first reading of " + withPort.length + " Envoy(s)' stats port (every --proxy-stats-interval).";
}

// History: kept by the server (the last hour), so a reload shows the same.
function eventText(e) {
  const where = e.backend + " " + e.endpoint;
  const why = (e.reasons || []).join("; ");
  switch (e.type) {
    case "Ejected": return where + " ejected on " + e.node + (why ? ": " + why : "");
    case "Recovered": return where + " recovered on " + e.node + (why ? ": " + why : "");
    default: return where + " unknown since " + new Date(e.time).toLocaleTimeString() + " on " + e.node + (why ? ": " + why : "");
  }
}

function renderEvents(events) {
  const list = document.getElementById("events");
  const cls = { Ejected: "bad", Recovered: "ok", Unknown: "degraded" };
  list.replaceChildren(...events.slice().reverse().map(e =>
    el("li", { class: cls[e.type] || "", "data-seq": e.seq, "data-type": e.type, "data-endpoint": e.endpoint },
      new Date(e.time).toLocaleTimeString() + "  " + eventText(e))));
  if (!events.length) list.replaceChildren(el("li", { class: "muted" }, "No ejection or recovery in the last hour."));
}

// line draws one series as an SVG polyline scaled to its own maximum, with the figures as text.
function line(points, value, cls, attrs, label) {
  const w = 360, h = 40;
  const vals = points.map(value), maxV = Math.max(0, ...vals);
  const t0 = points.length ? Date.parse(points[0].time) : 0, t1 = points.length ? Date.parse(points[points.length - 1].time) : 1;
  const xy = points.map((p, i) => {
    const x = t1 > t0 ? (Date.parse(p.time) - t0) / (t1 - t0) * w : 0;
    const y = maxV > 0 ? h - vals[i] / maxV * (h - 2) : h;
    return x.toFixed(1) + "," + y.toFixed(1);
  }).join(" ");
  const last = vals.length ? vals[vals.length - 1] : 0;
  const svg = el("svg:svg", Object.assign({ width: w + 260, height: h + 4, class: "series " + cls, "data-points": points.length,
    "data-max": maxV, "data-last": last }, attrs));
  svg.append(el("svg:polyline", { points: xy, class: "line" }));
  svg.append(el("svg:text", { x: w + 8, y: h / 2 + 4 }, label(last, maxV)));
  return svg;
}

function renderSeries(backends) {
  const box = document.getElementById("series");
  box.replaceChildren(...backends.map(b => {
    const d = el("div", { class: "backend-series", "data-backend": b.name }, el("h4", {}, b.name));
    d.append(el("p", { class: "muted" }, "p99 latency (per backend)"),
      line(b.latencyP99 || [], p => p.latencyP99Ms, "p99", { "data-backend": b.name }, (l, m) => "p99 " + ms(l) + " (max " + ms(m) + ")"));
    for (const e of b.endpoints || []) {
      d.append(el("p", { class: "muted" }, e.address),
        line(e.points, p => p.requestsPerSecond, "rps", { "data-endpoint": e.address }, (l, m) => l.toFixed(1) + " rps (max " + m.toFixed(1) + ")"),
        line(e.points, p => p.errorsPerSecond, "errors", { "data-endpoint": e.address }, (l, m) => l.toFixed(2) + " errors/s (max " + m.toFixed(2) + ")"));
    }
    return d;
  }));
  if (!backends.length) box.replaceChildren(el("p", { class: "muted" }, "No readings yet."));
}

let historyBusy = false;
async function loadHistory() {
  if (!selected || historyBusy) return;
  historyBusy = true;
  try {
    const r = await fetch("/dashboard/api/history/" + selected.split("/").map(encodeURIComponent).join("/"), { credentials: "same-origin" });
    if (r.status === 401) { location.reload(); return; }
    if (!r.ok) return;
    const h = await r.json();
    renderEvents(h.events || []);
    renderSeries(h.backends || []);
  } finally {
    historyBusy = false;
  }
}

function render(state) {
  document.getElementById("updated").textContent = "updated " + new Date(state.time).toLocaleTimeString();
  renderPolicies(state.policies);
  renderProxies(state.proxies);
  renderLive(state);
}

async function loadDetail() {
  document.getElementById("policy-name").textContent = selected || "No policy";
  if (!selected) return;
  const r = await fetch("/dashboard/api/policies/" + selected.split("/").map(encodeURIComponent).join("/"), { credentials: "same-origin" });
  if (r.status === 401) { location.reload(); return; }
  if (!r.ok) return;
  const d = await r.json();
  document.getElementById("yaml").textContent = d.yaml;
  const ex = d.explain || { resources: [], fields: [] };
  document.getElementById("resources").replaceChildren(...(ex.resources || []).map(x => el("li", {}, x.type + " " + x.name)));
  fill(document.querySelector("#fields tbody"), (ex.fields || []).map(f => [f.policy, f.value, f.resource ? f.resource.type + " " + f.resource.name : "", f.envoy ? f.envoy + (f.envoyValue ? " = " + f.envoyValue : "") : (f.note || "")]));
}

function connect() {
  if (source) source.close();
  lastHealth = null;
  source = new EventSource("/dashboard/api/events?policy=" + encodeURIComponent(selected || ""));
  source.addEventListener("state", ev => {
    const state = JSON.parse(ev.data);
    const had = selected;
    render(state);
    if (had !== selected) { loadDetail(); loadHistory(); connect(); } // the first policy was picked
  });
  source.onerror = async () => {
    // Session gone (logged out elsewhere, expired, lbplane restarted): back to the login form.
    const r = await fetch("/dashboard/api/state", { credentials: "same-origin" });
    if (r.status === 401) location.reload();
  };
}

function select(key) {
  selected = key;
  history.replaceState(null, "", "#" + encodeURIComponent(key));
  document.getElementById("events").replaceChildren();
  document.getElementById("series").replaceChildren();
  loadDetail();
  loadHistory();
  connect();
}

document.addEventListener("DOMContentLoaded", () => { loadDetail(); loadHistory(); connect(); setInterval(loadHistory, 5000); });
