// lbplane dashboard: plain JavaScript, no dependencies. Every value from the server goes into the page as
// text (textContent / attributes), never as HTML.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
let selected = decodeURIComponent(location.hash.slice(1));
let source = null;
let lastHealth = null; // every endpoint's health as text, to fetch the history when it changes
let lastProxies = null;
let lastState = null;
let historyData = [];  // the selected policy's series, from /history
let rangeSec = 900;    // the charts' time range
let canChange = false; // a session of the admin token: drain, maintenance and ready
let listKey = "";      // what the policy list shows, to redraw it only when that changes

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

// stateOf is what the page calls an endpoint: ejected, unknown or disputed from its health, draining when
// Envoy holds it DRAINING (an operator's drain, or the spec's) and nothing else.
function stateOf(ep) {
  if ((ep.reasons || []).length === 1 && ep.reasons[0] === "draining") return "draining";
  if (ep.health === "Ejected") return "ejected";
  if (ep.health === "Unknown") return "unknown";
  return ep.ejectedOn > 0 ? "disputed" : "healthy";
}

// warmingOf says how far an endpoint inside its backend's slow-start window is ("warming, 40 % of full
// weight"), "" when it is not warming up.
function warmingOf(ep) {
  return ep.warmingPercent != null ? "warming, " + ep.warmingPercent + " % of full weight" : "";
}

// Conditions whose True is bad news; for the others False is.
const TRUE_IS_BAD = new Set(["RolledBack", "Degraded", "Conflicted", "Stalled"]);
function condGood(c) { return c.status === "Unknown" ? null : (c.status === "True") !== TRUE_IS_BAD.has(c.type); }
function condClass(c) { const g = condGood(c); return g === null ? "degraded" : g ? "ok" : "bad"; }

function bytes(n) {
  if (n == null) return "-";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(Math.round(n))) + " " + u[i];
}
function num(n) { return n == null ? "-" : n >= 1e6 ? (n / 1e6).toFixed(1) + "M" : n >= 1e4 ? (n / 1e3).toFixed(1) + "k" : String(Math.round(n * 10) / 10); }
function dur(sec) {
  sec = Math.round(sec);
  if (sec < 60) return sec + "s";
  if (sec < 3600) return Math.floor(sec / 60) + "m " + (sec % 60 ? (sec % 60) + "s" : "");
  return Math.floor(sec / 3600) + "h " + Math.floor(sec % 3600 / 60) + "m";
}
function hhmm(t, secs) {
  const d = new Date(t), p = x => String(x).padStart(2, "0");
  return p(d.getHours()) + ":" + p(d.getMinutes()) + (secs ? ":" + p(d.getSeconds()) : "");
}
// rateClass colours a 5xx share: none, some (under 5 %), many.
function rateClass(f) { return f == null ? "muted" : f === 0 ? "ok" : f < 0.05 ? "degraded" : "bad"; }

// policyHealth sums a policy up for the overview: failing (a condition in a bad state), degraded (endpoints
// not all healthy, or Envoys that disagree), or ok; with the reasons as text.
function policyHealth(p) {
  const conds = p.status.conditions || [];
  const bad = conds.filter(c => condGood(c) === false).map(c => c.status === "True" ? c.type : "not " + c.type);
  const ep = p.status.endpoints || {};
  const degraded = [];
  if (ep.total > 0 && ep.healthy < ep.total) degraded.push(ep.healthy + "/" + ep.total + " healthy");
  if (ep.mismatched > 0) degraded.push("Envoys disagree on " + ep.mismatched);
  const r = p.traffic && p.traffic.clientErrorRate;
  if (r != null && r >= 0.05) degraded.push(pct(r) + " 5xx");
  if (bad.length) return { state: "failing", text: bad.join(", "), degraded };
  if (degraded.length) return { state: "degraded", text: "degraded: " + degraded.join(", "), degraded };
  return { state: "ok", text: "ok", degraded };
}

// gatewayText says what a Gateway's policy serves: "gateway shop/web · http:80 · shop.example.com"; "" for a
// LoadBalancerPolicy.
function gatewayText(p) {
  const g = p.gateway;
  if (!g) return "";
  return "gateway " + g.gateway + " · " + (g.listeners || []).map(l => l + ":" + g.port).join(", ") + " · " + (g.hostname || "* (any host name)");
}

const MAX_LISTED = 200; // policies drawn in the list at once: the filter finds the others

// renderPolicies draws the overview (counts by state, which filter on a click) and the filtered list, the
// failing and degraded first; with many policies it draws MAX_LISTED and says how many more match.
function renderPolicies(policies) {
  if (!selected && policies.length) selected = policies[0].namespace + "/" + policies[0].name;
  const rows = policies.map(p => Object.assign({ key: p.namespace + "/" + p.name, p }, policyHealth(p)));
  const counts = { all: rows.length, failing: 0, degraded: 0, ok: 0, overrides: 0 };
  for (const r of rows) {
    counts[r.state]++;
    if ((r.p.status.endpointOverrides || []).length) counts.overrides++;
  }
  const ov = document.getElementById("overview");
  ov.replaceChildren(...[["all", "policies"], ["failing", "failing"], ["degraded", "degraded"], ["ok", "ok"], ["overrides", "with drained endpoints"]].map(([k, label]) =>
    el("button", { type: "button", class: "count " + k + (document.getElementById("filter-state").value === k ? " active" : ""), "data-count": k, "data-value": counts[k] },
      el("b", {}, String(counts[k])), " " + label)));
  ov.querySelectorAll("button").forEach(b => b.addEventListener("click", () => {
    document.getElementById("filter-state").value = b.getAttribute("data-count");
    listKey = ""; renderPolicies(lastState.policies);
  }));
  const text = document.getElementById("filter").value.trim().toLowerCase();
  const want = document.getElementById("filter-state").value;
  const order = { failing: 0, degraded: 1, ok: 2 };
  const match = rows.filter(r => (!text || r.key.toLowerCase().includes(text) || (r.p.group || "").toLowerCase().includes(text) ||
    gatewayText(r.p).toLowerCase().includes(text)) &&
    (want === "all" || (want === "overrides" ? (r.p.status.endpointOverrides || []).length > 0 : r.state === want)));
  match.sort((a, b) => order[a.state] - order[b.state] || a.key.localeCompare(b.key));
  const shown = match.slice(0, MAX_LISTED);
  const key = selected + "\n" + shown.map(r => r.key + " " + gatewayText(r.p) + " " + r.text + " " + num(r.p.traffic && r.p.traffic.requests) + pct(r.p.traffic && r.p.traffic.clientErrorRate)).join("\n");
  document.getElementById("policies-more").textContent = match.length > shown.length ?
    "Showing " + shown.length + " of " + match.length + " matching policies: narrow the filter to see the others." :
    match.length ? match.length + " of " + rows.length + " policies" : "No policy matches.";
  if (key === listKey) return;
  listKey = key;
  const ul = document.getElementById("policies");
  ul.replaceChildren(...shown.map(r => {
    const t = r.p.traffic;
    const li = el("li", { "data-policy": r.key, "data-state": r.state, "data-degraded": r.degraded.length ? "true" : "false", class: r.key === selected ? "selected" : "" },
      el("span", { class: "dot " + r.state }), el("span", { class: "name" }, r.key),
      r.p.gateway ? el("div", { class: "gateway muted", "data-gateway": r.p.gateway.gateway }, gatewayText(r.p)) : "",
      el("span", { class: "figures muted" }, t ? num(t.requests / Math.max(1, t.windowSeconds)) + " rps · " : ""),
      t && t.clientErrorRate != null ? el("span", { class: "figures " + rateClass(t.clientErrorRate) }, pct(t.clientErrorRate) + " 5xx") : "",
      el("div", { class: "why " + (r.state === "failing" ? "bad" : r.state === "degraded" ? "degraded" : "ok") }, r.text));
    li.addEventListener("click", () => select(r.key));
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
    [c.type, el("span", { class: "cond " + condClass(c), "data-condition": c.type, "data-status": c.status }, c.status), c.reason, c.message]));
}

// renderTotals shows the selected policy's figures over its window: requests, responses by class, the
// client-facing error rate (the share of 5xx), open connections and bytes.
function renderTotals(p) {
  const box = document.getElementById("totals");
  const t = p && p.traffic;
  if (!t) { box.replaceChildren(); return; }
  const r = t.responses, w = Math.max(1, t.windowSeconds);
  const tile = (label, value, cls, key) => el("div", { class: "tile " + (cls || ""), "data-tile": key }, el("div", { class: "value" }, value), el("div", { class: "label" }, label));
  box.replaceChildren(
    tile("requests/s", num(t.requests / w), "", "rps"),
    tile("2xx", num(r["2xx"]), "c2xx", "2xx"), tile("3xx", num(r["3xx"]), "c3xx", "3xx"),
    tile("4xx", num(r["4xx"]), "c4xx", "4xx"), tile("5xx", num(r["5xx"]), r["5xx"] ? "bad" : "c5xx", "5xx"),
    tile("5xx rate (clients)", pct(t.clientErrorRate), rateClass(t.clientErrorRate), "error-rate"),
    tile("connections open", num(t.connectionsActive), "", "connections"),
    tile("bytes in / out", bytes(t.bytesReceived) + " / " + bytes(t.bytesSent), "", "bytes"),
    el("div", { class: "muted window" }, "over the last " + t.windowSeconds + " s, summed over the Envoys"));
}

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
    if (e.warmingPercent != null) t.append(" · ", el("svg:tspan", { class: "ep-warming", "data-warming": e.warmingPercent }, "warming " + e.warmingPercent + " %"));
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


// overrideOf is the operator's override in force on an endpoint of a backend, if any.
function overrideOf(p, backend, address) {
  const host = address.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
  return (p.status.endpointOverrides || []).find(o => (!o.backend || o.backend === backend) &&
    (o.endpoint === address || o.endpoint === host));
}

function seriesOf(backend, address) {
  const b = historyData.find(x => x.name === backend);
  return b && (b.endpoints || []).find(e => e.address === address);
}

// downIn sums an endpoint's downtime within the chart's range, and says whether it is down now.
function downIn(spans, now) {
  const from = now - rangeSec * 1000;
  let sum = 0, open = null;
  for (const d of spans || []) {
    const a = Math.max(from, Date.parse(d.from)), b = d.to ? Date.parse(d.to) : now;
    if (!d.to) open = d;
    if (b > a) sum += (b - a) / 1000;
  }
  return { sum, open };
}

// renderEndpoints is the stats table: per endpoint its state, load, connections, errors, the last reading of
// its health and its downtime in the chart's range, with drain, maintenance and ready for an admin session.
function renderEndpoints(p, backends, now) {
  const rows = [];
  for (const b of backends) {
    const listed = new Set();
    for (const e of b.perEndpoint || []) {
      listed.add(e.address);
      rows.push({ b, e, o: overrideOf(p, b.name, e.address) });
    }
    // Under maintenance: not in Envoy's load assignment, so no Envoy reports it.
    for (const o of p.status.endpointOverrides || [])
      if (o.state === "Maintenance" && (!o.backend || o.backend === b.name) && !listed.has(o.endpoint))
        rows.push({ b, e: { address: o.endpoint, maintenance: true }, o });
  }
  const head = ["backend", "endpoint", "state", "req", "rps", "active", "conns", "opened", "connect fail", "timeouts", "errors", "last check", "down (" + dur(rangeSec) + ")"];
  if (canChange) head.push("action");
  const t = el("table", { id: "endpoint-table" }, el("thead", {}, el("tr", {}, ...head.map(h => el("th", {}, h)))), el("tbody"));
  t.querySelector("tbody").replaceChildren(...rows.map(({ b, e, o }) => {
    let state = e.maintenance ? "maintenance" : stateOf(e);
    if (o && o.state === "Maintenance") state = "maintenance";
    else if (o && o.state === "Draining") state = "draining";
    const s = seriesOf(b.name, e.address);
    const down = downIn(s && s.downtime, now);
    const last = s && s.lastCheck ? Math.max(0, (now - Date.parse(s.lastCheck)) / 1000) : null;
    const stateText = state + (o ? " since " + hhmm(o.since, true) : state === "draining" ? " (spec)" : "") +
      (state === "ejected" || state === "disputed" ? ": " + (e.reasons || []).join("; ") : "") +
      (warmingOf(e) ? ", " + warmingOf(e) : "");
    const cells = [b.name, el("span", { class: "mono" }, e.address), el("span", { class: "ep-state " + state, "data-state": state,
      ...(e.warmingPercent != null ? { "data-warming": e.warmingPercent } : {}) }, stateText)];
    if (e.maintenance) cells.push(...Array.from({ length: 9 }, () => el("span", { class: "muted" }, "-")));
    else cells.push(num(e.requests), (e.requestsPerSecond || 0).toFixed(1), num(e.activeRequests), num(e.connectionsActive || 0), num(e.connections || 0),
      el("span", { class: e.connectFailures ? "bad" : "" }, num(e.connectFailures || 0)), el("span", { class: e.timeouts ? "bad" : "" }, num(e.timeouts || 0)),
      el("span", { class: rateClass(e.errorRate) }, num(e.errors) + " (" + pct(e.errorRate) + ")"),
      last == null ? "-" : dur(last) + " ago");
    cells.push(el("span", { class: down.sum > 0 ? "bad" : "ok", "data-downtime": Math.round(down.sum) },
      dur(down.sum) + (down.open ? " (down since " + hhmm(down.open.from, true) + ")" : "")));
    if (canChange) {
      const act = el("span", { class: "actions" });
      const button = (label, st, ep, be) => {
        const x = el("button", { type: "button", "data-action": st, "data-endpoint": e.address, "data-backend": b.name }, label);
        x.addEventListener("click", () => setState(ep, be, st));
        return x;
      };
      if (o) act.append(button("Ready", "Ready", o.endpoint, o.backend || ""));
      if (state !== "draining" && state !== "maintenance") act.append(button("Drain", "Draining", e.address, b.name));
      if (state !== "maintenance") act.append(button("Maintenance", "Maintenance", e.address, b.name));
      cells.push(act);
    }
    const tr = el("tr", { class: "ep-row " + state, "data-endpoint": e.address, "data-backend": b.name, "data-state": state },
      ...cells.map(c => el("td", {}, c)));
    return tr;
  }));
  document.getElementById("endpoints").replaceChildren(rows.length ? t : el("p", { class: "muted" }, "No endpoint reported yet."));
}

// setState asks lbplane to drain an endpoint, put it under maintenance or make it ready again; lbplane
// stores it and waits for the Envoys before it answers.
async function setState(endpoint, backend, state) {
  const msg = document.getElementById("action-result");
  msg.className = "muted";
  msg.textContent = state + " " + endpoint + "…";
  const r = await fetch("/dashboard/api/policies/" + selected.split("/").map(encodeURIComponent).join("/") + "/endpoint-state", {
    method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ endpoint, backend, state })
  });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    msg.className = "bad";
    msg.textContent = state + " " + endpoint + ": " + ((body.errors || []).join("; ") || r.status);
    return;
  }
  msg.className = "ok";
  msg.setAttribute("data-done", state + " " + endpoint);
  msg.textContent = endpoint + ": " + (state === "Ready" ? "ready" : state.toLowerCase()) + (body.changed ? "" : " already") + " on " + body.endpoints + " endpoint(s)" +
    ((body.specDraining || []).length ? "; the spec still drains " + body.specDraining.join(", ") : "") +
    (body.laggingTotal ? "; " + body.laggingTotal + " Envoy(s) had not taken it yet" : "");
}

function renderLive(state) {
  const chartBox = document.getElementById("chart");
  const perProxy = document.getElementById("per-proxy");
  const p = state.policies.find(x => x.namespace + "/" + x.name === selected);
  renderConditions(p);
  renderTotals(p);
  renderRollout(p, state.proxies);
  const backends = (state.live && state.live.backends) || [];
  if (p) renderEndpoints(p, backends, Date.parse(state.time));
  else document.getElementById("endpoints").replaceChildren();
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
          el("span", { class: e.ejectedOn > 0 ? "ejected" : "ok" }, healthOf(e, 1) + (warmingOf(e) ? ", " + warmingOf(e) : ""))]);
  const t = el("table", {}, el("thead", {}, el("tr", {}, ...["envoy", "backend", "endpoint", "requests", "rps", "active", "share", "health"].map(h => el("th", {}, h)))), el("tbody"));
  fill(t.querySelector("tbody"), rows);
  perProxy.replaceChildren(t);
  // A change of health: the server has logged it; show its history now rather than at the next refresh.
  const now = backends.map(b => (b.perEndpoint || []).map(e => b.name + " " + e.address + " " + healthOf(e, b.proxies)).join("\n")).join("\n");
  if (lastHealth !== null && lastHealth !== now) loadHistory();
  lastHealth = now;
}

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

// plot draws series over the chosen range on a time axis (a tick every few minutes, labelled HH:MM) with
// the value axis from 0 to the highest value; spans (downtime) are shaded. Each series is
// {name, cls, value(point)}; the svg carries the first series' figures for tests (data-points, -max, -last).
function plot(points, series, opts) {
  const W = 460, H = 90, L = 46, R = 8, T = 8, B = 18, now = opts.now, from = now - rangeSec * 1000;
  const inRange = points.filter(p => Date.parse(p.time) >= from);
  const vals = series.map(s => inRange.map(s.value));
  const maxV = Math.max(0, ...vals.flat().filter(v => v != null));
  const top = opts.max != null ? Math.max(opts.max, maxV) : maxV > 0 ? maxV * 1.1 : 1;
  const x = t => L + (t - from) / (now - from) * (W - L - R);
  const y = v => T + (H - T - B) * (1 - v / top);
  const first = vals[0] || [];
  const svg = el("svg:svg", Object.assign({ width: W, height: H, class: "series " + opts.cls, "data-points": inRange.length,
    "data-max": Math.max(0, ...first), "data-last": first.length ? first[first.length - 1] : 0 }, opts.attrs || {}));
  svg.append(el("svg:rect", { class: "plot-bg", x: L, y: T, width: W - L - R, height: H - T - B }));
  for (const d of opts.spans || []) {
    const a = Math.max(from, Date.parse(d.from)), b = d.to ? Date.parse(d.to) : now;
    if (b > a) svg.append(el("svg:rect", { class: "down-span", x: x(a), y: T, width: Math.max(1, x(b) - x(a)), height: H - T - B }));
  }
  const step = rangeSec <= 300 ? 60 : rangeSec <= 900 ? 180 : 600;
  for (let t = Math.ceil(from / (step * 1000)) * step * 1000; t <= now; t += step * 1000) {
    svg.append(el("svg:line", { class: "grid", x1: x(t), x2: x(t), y1: T, y2: H - B }));
    svg.append(el("svg:text", { class: "axis", x: x(t), y: H - 4, "text-anchor": "middle" }, hhmm(t)));
  }
  svg.append(el("svg:line", { class: "grid", x1: L, x2: W - R, y1: y(top / 2), y2: y(top / 2) }));
  const fmt = opts.fmt || num;
  svg.append(el("svg:text", { class: "axis", x: L - 4, y: T + 8, "text-anchor": "end" }, fmt(top)));
  svg.append(el("svg:text", { class: "axis", x: L - 4, y: y(top / 2) + 4, "text-anchor": "end" }, fmt(top / 2)));
  svg.append(el("svg:text", { class: "axis", x: L - 4, y: H - B, "text-anchor": "end" }, fmt(0)));
  series.forEach((s, i) => {
    const xy = inRange.map((p, j) => vals[i][j] == null ? null : x(Date.parse(p.time)).toFixed(1) + "," + y(vals[i][j]).toFixed(1)).filter(Boolean).join(" ");
    svg.append(el("svg:polyline", { points: xy, class: "line " + s.cls }));
  });
  const legend = el("div", { class: "legend" }, el("b", {}, opts.title), " ",
    ...series.map((s, i) => el("span", { class: "key " + s.cls }, s.name + " " + fmt(vals[i].length ? vals[i][vals[i].length - 1] : null))));
  return el("div", { class: "plot" }, legend, svg);
}

function renderSeries(backends) {
  const box = document.getElementById("series");
  const now = lastState ? Date.parse(lastState.time) : Date.now();
  box.replaceChildren(...backends.map(b => {
    const d = el("div", { class: "backend-series", "data-backend": b.name }, el("h4", {}, b.name));
    const grid = el("div", { class: "plots" });
    const tr = b.traffic || [];
    grid.append(
      plot(tr, [{ name: "2xx", cls: "c2xx", value: p => p["2xx"] }, { name: "3xx", cls: "c3xx", value: p => p["3xx"] },
        { name: "4xx", cls: "c4xx", value: p => p["4xx"] }, { name: "5xx", cls: "c5xx", value: p => p["5xx"] }],
        { now, cls: "classes", title: "responses/s by class", attrs: { "data-backend": b.name } }),
      plot(tr, [{ name: "5xx", cls: "c5xx", value: p => p.clientErrorRate == null ? null : 100 * p.clientErrorRate }],
        { now, cls: "error-rate", title: "client-facing error rate (% 5xx)", fmt: v => v == null ? "-" : v.toFixed(1) + "%", attrs: { "data-backend": b.name } }),
      plot(b.latencyP99 || [], [{ name: "p99", cls: "p99", value: p => p.latencyP99Ms }],
        { now, cls: "p99", title: "p99 latency (per backend)", fmt: v => ms(v), attrs: { "data-backend": b.name } }),
      plot(tr, [{ name: "open", cls: "cx", value: p => p.connectionsActive }],
        { now, cls: "connections", title: "connections open", attrs: { "data-backend": b.name } }),
      plot(tr, [{ name: "in", cls: "rx", value: p => p.bytesReceived }, { name: "out", cls: "tx", value: p => p.bytesSent }],
        { now, cls: "bytes", title: "bytes/s from and to the endpoints", fmt: v => v == null ? "-" : bytes(v) + "/s", attrs: { "data-backend": b.name } }));
    for (const e of b.endpoints || []) {
      grid.append(plot(e.points, [{ name: "rps", cls: "rps", value: p => p.requestsPerSecond }, { name: "errors/s", cls: "errors", value: p => p.errorsPerSecond }],
        { now, cls: "rps", title: e.address, spans: e.downtime, attrs: { "data-endpoint": e.address } }));
    }
    d.append(grid);
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
    historyData = h.backends || [];
    renderEvents(h.events || []);
    renderSeries(historyData);
  } finally {
    historyBusy = false;
  }
}

function render(state) {
  lastState = state;
  canChange = !!state.canChange;
  document.getElementById("updated").textContent = "updated " + new Date(state.time).toLocaleTimeString();
  document.getElementById("role").textContent = canChange ? "admin: may drain" : "read-only";
  document.getElementById("role").className = "role " + (canChange ? "admin" : "readonly");
  renderPolicies(state.policies);
  const sel = state.policies.find(p => p.namespace + "/" + p.name === selected);
  document.getElementById("policy-gateway").textContent = sel ? gatewayText(sel) : "";
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
  listKey = "";
  historyData = [];
  history.replaceState(null, "", "#" + encodeURIComponent(key));
  document.getElementById("events").replaceChildren();
  document.getElementById("series").replaceChildren();
  document.getElementById("action-result").textContent = "";
  loadDetail();
  loadHistory();
  connect();
}

document.addEventListener("DOMContentLoaded", () => {
  const redraw = () => { listKey = ""; if (lastState) renderPolicies(lastState.policies); };
  document.getElementById("filter").addEventListener("input", redraw);
  document.getElementById("filter-state").addEventListener("change", redraw);
  document.querySelectorAll("#range button").forEach(b => b.addEventListener("click", () => {
    rangeSec = +b.getAttribute("data-range");
    document.querySelectorAll("#range button").forEach(x => x.classList.toggle("active", x === b));
    renderSeries(historyData);
    if (lastState) renderLive(lastState);
  }));
  loadDetail(); loadHistory(); connect(); setInterval(loadHistory, 5000);
});
