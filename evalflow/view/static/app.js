/* evalflow view: the whole front end, vanilla JS with no build step and no remote asset.
 *
 * Everything a run folder holds (model output, task text, file names, config values) is data, never
 * markup: the DOM is built only with createElement, textContent and an allow-list of attributes, and a
 * link's href is a "#/..." route, a same-origin relative path, or (tracker links only) an http(s) URL.
 * The same file runs against the server (fetch /api/...), inside a static bundle (meta
 * evalflow-mode=bundle), where each payload is a data/(fnv1a32 of its api path).js file loaded by a
 * script element it inserts, so it works from file://, and inside one self-contained page (evalflow
 * report, meta evalflow-mode=single), whose payloads are gzip-compressed, base64-encoded blocks
 * (never run): a line per payload, its key and JSON a tab apart, parsed when asked.
 */
"use strict";

(function () {
  const MODE_META = document.querySelector('meta[name="evalflow-mode"]');
  const MODE_NAME = MODE_META ? MODE_META.getAttribute("content") : "server";
  const MODE = MODE_NAME === "bundle" || MODE_NAME === "single" ? MODE_NAME : "server";
  const SNAPSHOT = MODE === "bundle" ? "This bundle" : "This report";  // what a static copy calls itself
  const STATUSES = new Set(["complete", "partial", "running", "failed", "unreadable"]);
  const SAFE_ATTRS = new Set(["id", "type", "placeholder", "title", "colspan", "for", "name", "alt", "role",
    "aria-label", "data-task", "data-status", "data-doc", "min", "max", "step", "value", "lang"]);

  /* ---------- DOM helpers: the only way this file makes elements ---------- */

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = String(value);
      else if (key === "href") setRoute(node, String(value));
      else if (SAFE_ATTRS.has(key)) node.setAttribute(key, String(value));
      else throw new Error("attribute not allowed: " + key);
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  /** An in-app link: only "#..." routes and relative same-origin paths, never a scheme. */
  function setRoute(node, href) {
    const relative = !/^[a-z][a-z0-9+.-]*:/i.test(href) && !href.startsWith("//") && !href.startsWith("\\");
    if (!(href.startsWith("#") || relative)) throw new Error("link not allowed: " + href);
    node.setAttribute("href", href);
  }

  /** A tracker's link: kept only when it parses as http(s); anything else is shown as text. */
  function externalLink(url, label) {
    let parsed = null;
    try { parsed = new URL(String(url)); } catch (error) { parsed = null; }
    if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
      return el("span", { title: "not an http(s) link" }, String(label), " (", String(url), ")");
    }
    const link = el("a", {}, String(label));
    link.setAttribute("href", parsed.href);
    link.setAttribute("rel", "noopener noreferrer");
    link.setAttribute("target", "_blank");
    return link;
  }

  function route(...parts) { return "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/"); }
  function withQuery(hash, params) {
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(params)) if (value !== null && value !== undefined && value !== "") search.set(key, String(value));
    const text = search.toString();
    return text ? hash + "?" + text : hash;
  }

  function fmt(value) {
    if (value === null || value === undefined) return "—";
    if (typeof value !== "number") return typeof value === "string" ? value : JSON.stringify(value);
    if (!Number.isFinite(value)) return String(value);
    if (Number.isInteger(value)) return String(value);
    if (Math.abs(value) >= 1000) return value.toFixed(1);
    if (value !== 0 && Math.abs(value) < 1e-3) return value.toExponential(2);
    return value.toFixed(4);
  }
  function text(value) { return typeof value === "string" ? value : value === null || value === undefined ? "" : JSON.stringify(value, null, 2); }
  function badge(status) {
    const known = STATUSES.has(status) ? status : "unknown";
    return el("span", { class: "badge status-" + known, "data-status": known }, known === "unknown" ? String(status) : known);
  }
  function table(headers, rows, attrs) {
    return el("table", attrs || {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))), el("tbody", {}, rows));
  }
  function kvTable(object) {
    return el("table", { class: "kv" }, el("tbody", {}, Object.entries(object || {}).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, renderValue(v))))));
  }
  /** Any JSON value as elements: objects as key/value tables, lists of objects as tables. */
  function renderValue(value) {
    if (value === null || value === undefined) return el("span", { class: "muted" }, "—");
    if (Array.isArray(value)) {
      if (value.every((v) => v !== null && typeof v === "object" && !Array.isArray(v))) {
        const keys = [...new Set(value.flatMap((v) => Object.keys(v)))];
        return table(keys, value.map((row) => el("tr", {}, keys.map((k) => el("td", {}, renderValue(row[k]))))));
      }
      return value.map(fmt).join(", ");
    }
    if (typeof value === "object") return kvTable(value);
    return fmt(value);
  }
  function pre(value) { return el("pre", {}, text(value)); }
  function section(title, ...children) { return el("section", {}, el("h2", {}, title), children); }

  /* ---------- data: the server's API, or the bundle's files ---------- */

  /** The api path with its query sorted by key, values encoded as encodeURIComponent does: the
   *  bundle's key (Python: urllib.parse.quote(value, safe="!*'()")). Empty values are left out. */
  function apiPath(path, params) {
    const keys = Object.keys(params || {}).filter((k) => params[k] !== null && params[k] !== undefined && params[k] !== "").sort();
    // a list is repeated words on the server (ids=A&ids=B: an id may hold a comma) and one
    // comma-joined word in a bundle's key (its payloads were written under ids=A,B)
    const word = (k, v) => k + "=" + encodeURIComponent(String(v));
    const words = (k) => Array.isArray(params[k]) ? (MODE === "server" ? params[k].map((v) => word(k, v)).join("&") : word(k, params[k].join(","))) : word(k, params[k]);
    return keys.length ? path + "?" + keys.map(words).join("&") : path;
  }

  /** FNV-1a 32 of the UTF-8 bytes, 8 lowercase hex digits: a bundle payload's file name. */
  function fnv1a32(textValue) {
    let hash = 0x811c9dc5;
    for (const byte of new TextEncoder().encode(textValue)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
    return hash.toString(16).padStart(8, "0");
  }

  const bundleStore = new Map();
  Object.defineProperty(window, "EVALFLOW_BUNDLE", {
    value: Object.freeze({ put(key, value) { bundleStore.set(String(key), value); } }),
    writable: false, configurable: false,
  });

  /** The single page's data blocks by name: "" holds every payload but the documents in full, a
   *  run's task's documents are the block named /api/sample?id=..&task=.. (unpacked when opened). */
  const pageBlocks = new Map();
  if (MODE === "single") {
    for (const block of document.querySelectorAll('script[type="application/gzip+base64"][data-block]')) pageBlocks.set(block.getAttribute("data-block"), block);
  }
  const unpacked = new Map();

  /** One block's payloads, key -> JSON text: base64-decoded (atob drops the line breaks), gunzipped, split. */
  async function readBlock(block) {
    const binary = atob(block ? block.textContent : "");
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const textValue = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
    const found = new Map();
    for (const line of textValue.split("\n")) {
      const tab = line.indexOf("\t");
      if (tab > 0) found.set(JSON.parse(line.slice(0, tab)), line.slice(tab + 1));
    }
    return found;
  }
  function blockOf(key) {
    let name = "";
    if (key.startsWith("/api/sample?")) {
      const query = new URLSearchParams(key.slice(key.indexOf("?") + 1));
      name = apiPath("/api/sample", { id: query.get("id"), task: query.get("task") });
    }
    if (!unpacked.has(name)) unpacked.set(name, pageBlocks.has(name) ? readBlock(pageBlocks.get(name)) : Promise.resolve(new Map()));
    return unpacked.get(name);
  }

  function loadBundle(key) {
    if (bundleStore.has(key)) return Promise.resolve(bundleStore.get(key));
    if (MODE === "single") {
      return blockOf(key).then((found) => {
        if (!found.has(key)) throw new Error(SNAPSHOT + " does not hold " + key + " (it was not written with it).");
        bundleStore.set(key, JSON.parse(found.get(key)));
        return bundleStore.get(key);
      });
    }
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = "data/" + fnv1a32(key) + ".js";
      script.addEventListener("load", () => {
        script.remove();
        if (bundleStore.has(key)) resolve(bundleStore.get(key));
        else reject(new Error("This bundle does not hold " + key + "."));
      });
      script.addEventListener("error", () => { script.remove(); reject(new Error("This bundle does not hold " + key + " (it was not written with it).")); });
      document.head.append(script);
    });
  }

  async function api(path, params) {
    if (MODE !== "server") {
      if (path === "/api/samples") return bundleSamples(params);
      return loadBundle(apiPath(path, params));
    }
    const response = await fetch(apiPath(path, params).slice(1), { headers: { Accept: "application/json" } });
    let body = null;
    try { body = await response.json(); } catch (error) { body = null; }
    if (!response.ok) throw new Error((body && body.error) || response.status + " " + response.statusText);
    return body;
  }

  /** The bundle holds every row of a task (all=1); filter and page them as query() does. */
  async function bundleSamples(params) {
    const all = await loadBundle(apiPath("/api/samples", { id: params.id, task: params.task, all: 1 }));
    const needle = params.text ? String(params.text).toLowerCase() : "";
    const metricValue = params.value === undefined || params.value === "" ? null : Number(params.value);
    const rows = all.rows.filter((row) =>
      (!params.filter || row.filter === params.filter) &&
      (!params.metric || (metricValue === null ? (row.metrics || {})[params.metric] !== undefined : Number((row.metrics || {})[params.metric]) === metricValue)) &&
      (params.correct === undefined || params.correct === "" || row.correct === (params.correct === "true")) &&
      (!params.verdict || row.verdict === params.verdict) &&
      (params.has_image === undefined || params.has_image === "" || Boolean(row.has_image) === (params.has_image === "true")) &&
      (!needle || [row.prompt, row.answer, row.target].some((v) => text(v).toLowerCase().includes(needle))));
    const offset = Number(params.offset || 0);
    const limit = Number(params.limit || 50);
    return { ...all, total: rows.length, offset, limit, rows: rows.slice(offset, offset + limit) };  // filters, verdicts, bundle_docs kept
  }

  /* ---------- router ---------- */

  let generation = 0;
  const main = document.getElementById("main");

  function parseHash() {
    const hash = location.hash.replace(/^#\/?/, "");
    const cut = hash.indexOf("?");
    const path = cut < 0 ? hash : hash.slice(0, cut);
    return { raw: path.split("/"), params: new URLSearchParams(cut < 0 ? "" : hash.slice(cut + 1)) };
  }
  const decode = (part) => decodeURIComponent(part || "");

  async function render() {
    const gen = ++generation;
    main.replaceChildren(el("p", { class: "muted" }, "Loading…"));
    let view;
    try {
      const { raw, params } = parseHash();
      const name = raw[0] || "runs";
      const seg = raw.slice(1).map(decode);
      if (name === "runs") view = await viewRuns(gen);
      else if (name === "run") view = await viewRun(gen, seg[0]);
      else if (name === "samples") view = await viewSamples(gen, seg[0], seg[1], params);
      else if (name === "sample") view = await viewSample(seg[0], seg[1], seg[2], params.get("filter"));
      else if (name === "compare") view = await viewCompare(seg, params);
      else if (name === "explain") view = await viewExplain(seg[0], params.get("against"));
      else if (name === "wrong") view = await viewAcross((raw[1] || "").split(",").filter(Boolean).map(decode));
      else if (name === "results") view = await viewResults((raw[1] || "").split(",").filter(Boolean).map(decode));
      else view = el("p", { class: "error" }, "No such page: #/" + name);
    } catch (error) {
      view = el("div", { class: "error", role: "alert" }, String(error && error.message ? error.message : error));
    }
    if (gen === generation) {
      main.replaceChildren(view);
      main.dataset.view = parseHash().raw[0] || "runs";  // a page is rendered (the browser tests wait on it)
    }
  }

  /* ---------- runs ---------- */

  const runsState = { filter: "", sort: "date", desc: true, group: false, selected: [] };

  /** The model as the user named it (the preset), the full name (a path) in the cell's title. */
  function modelLabel(run) { return run.model_label || run.model || "—"; }
  /** An lm-eval run's id is its results file's path (~120 characters): shown as its model folder
   *  and date; the id itself stays in the link and its title. */
  function runLabel(run) {
    if (run.layout !== "lm-eval") return run.id;
    const parts = String(run.id).split("/");
    // lm-eval names the model folder by its path with "/" as "__": the last part names the model
    const folder = (parts.length > 1 ? parts[parts.length - 2] : run.id).split("__").filter(Boolean).pop() || run.id;
    return folder + (run.date ? " · " + String(run.date).replace("T", " ").slice(0, 16) : "");
  }
  /** The overrides whose values differ between a sweep's jobs: what the sweep varied. */
  function varying(members) {
    const keys = [...new Set(members.flatMap((r) => Object.keys(r.overrides || {})))].sort();
    return keys.map((k) => [k, [...new Set(members.map((r) => fmt((r.overrides || {})[k])))]]).filter(([, values]) => values.length > 1);
  }
  function sweepHeading(sweep, members) {
    const dates = members.map((r) => r.date).filter(Boolean).sort();
    const varied = varying(members);
    return "sweep " + sweep + (dates.length ? " · " + String(dates[0]).replace("T", " ").slice(0, 16) : "") + " — " + members.length + " jobs" +
      (varied.length ? " · varying " + varied.map(([k, values]) => k + " = " + values.join(" | ")).join("; ") : "");
  }
  function overridesText(run) { return Object.entries(run.overrides || {}).map(([k, v]) => k + "=" + fmt(v)).join(" "); }
  function sortValue(run, key) {
    if (key.startsWith("metric:")) { const m = (run.metrics || {})[key.slice(7)]; return m ? m.value : null; }
    if (key === "tasks") return (run.tasks || []).join(", ");
    if (key === "overrides") return overridesText(run);
    return run[key];
  }
  function compareRuns(a, b) {
    const x = sortValue(a, runsState.sort), y = sortValue(b, runsState.sort);
    if (x === y) return 0;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return runsState.desc ? -order : order;
  }

  async function viewRuns(gen) {
    const data = await api("/api/runs");
    const runs = data.runs || [];
    const allMetrics = [...new Set(runs.flatMap((r) => Object.keys(r.metrics || {})))].sort();
    const metricNames = allMetrics.slice(0, 12);  // a wide suite's every subject is on each run's page
    const columns = [["", null], ["run", "id"], ["model", "model"], ["tasks", "tasks"], ["date", "date"], ["status", "status"],
      ...metricNames.map((m) => [m, "metric:" + m]), ["overrides", "overrides"]];
    const body = el("tbody");
    const head = el("tr");
    const count = el("span", { class: "muted" });
    const actions = el("span", { class: "links" });
    const filterBox = el("input", { type: "search", id: "runs-filter", placeholder: "filter runs (model, task, status, override…)", "aria-label": "filter runs" });
    filterBox.value = runsState.filter;
    const groupBox = el("input", { type: "checkbox", id: "runs-group" });
    groupBox.checked = runsState.group;

    function drawActions() {
      const ids = runsState.selected;
      const compare = ids.length >= 2 ? el("a", { href: route("compare", ...ids), id: "compare-link" }, "Compare " + ids.length + " selected")
        : el("span", { class: "disabled" }, "select two runs to compare");
      // sorted: the order means nothing here, and a bundle holds each selection once, sorted
      const across = ids.length >= 1 ? el("a", { href: "#/wrong/" + [...ids].sort().map(encodeURIComponent).join(","), id: "across-link" }, "Across selected runs") : null;
      const results = ids.length >= 2 ? el("a", { href: "#/results/" + [...ids].sort().map(encodeURIComponent).join(","), id: "results-link" }, "Results side by side") : null;
      actions.replaceChildren(...[compare, across, results].filter(Boolean));
    }
    function runRow(run) {
      const box = el("input", { type: "checkbox", "aria-label": "select " + run.id });
      box.checked = runsState.selected.includes(run.id);
      box.addEventListener("change", () => {
        runsState.selected = runsState.selected.filter((id) => id !== run.id);
        if (box.checked) runsState.selected.push(run.id);
        drawActions();
      });
      return el("tr", { "data-status": run.status },
        el("td", {}, box),
        el("td", {}, el("a", { href: route("run", run.id), title: run.id }, runLabel(run)), run.partial ? el("div", { class: "muted" }, run.partial) : null),
        el("td", { title: run.model }, modelLabel(run)), el("td", { class: "text" }, (run.tasks || []).join(", ")), el("td", { title: run.date }, run.date ? String(run.date).replace("T", " ").slice(0, 19) : "—"),
        el("td", {}, badge(run.status), run.error ? el("div", { class: "error" }, run.error) : null),
        metricNames.map((m) => { const v = (run.metrics || {})[m]; return el("td", { class: "num", title: v ? v.metric : null }, v ? fmt(v.value) + (v.stderr !== null && v.stderr !== undefined ? " ± " + fmt(v.stderr) : "") : "—"); }),
        el("td", {}, overridesText(run)));
    }
    function draw() {
      const needle = runsState.filter.toLowerCase();
      const shown = runs.filter((r) => !needle || [r.id, r.model, r.status, (r.tasks || []).join(" "), overridesText(r), r.sweep || ""].join(" ").toLowerCase().includes(needle)).sort(compareRuns);
      head.replaceChildren(...columns.map(([label, key]) => {
        const th = el("th", { class: key ? "sortable" + (runsState.sort === key ? (runsState.desc ? " sorted-desc" : " sorted-asc") : "") : null }, label);
        if (key) th.addEventListener("click", () => { runsState.desc = runsState.sort === key ? !runsState.desc : false; runsState.sort = key; draw(); });
        return th;
      }));
      const rows = [];
      if (runsState.group) {
        const groups = new Map();
        for (const run of shown) { const key = run.sweep || ""; if (!groups.has(key)) groups.set(key, []); groups.get(key).push(run); }
        for (const [sweep, members] of groups) {
          rows.push(el("tr", { class: "group" }, el("td", { colspan: columns.length }, sweep ? sweepHeading(sweep, members) : "single runs")));
          rows.push(...members.map(runRow));
        }
      } else rows.push(...shown.map(runRow));
      body.replaceChildren(...rows);
      count.textContent = shown.length + " of " + runs.length + " runs";
    }
    filterBox.addEventListener("input", () => { runsState.filter = filterBox.value; draw(); });
    groupBox.addEventListener("change", () => { runsState.group = groupBox.checked; draw(); });
    draw();
    drawActions();
    return el("div", {},
      el("h1", {}, "Runs"),
      el("p", { class: "muted" }, "under " + (data.roots || []).join(", "),
        allMetrics.length > metricNames.length ? " · showing " + metricNames.length + " of " + allMetrics.length + " metric columns" : ""),
      runs.length ? null : el("p", { class: "note", id: "no-runs" }, "No runs were found under " + (data.roots || []).join(", ") +
        ". A run appears here once `python -m evalflow` writes its run folder under one of these folders (outputs/ by default), or lm-eval writes its --output_path there; give other folders with `python -m evalflow view FOLDER`."),
      el("div", { class: "controls" }, filterBox, el("label", { for: "runs-group" }, groupBox, "group a sweep's jobs"), count, actions),
      el("table", { id: "runs" }, el("thead", {}, head), body));
  }

  /* ---------- one run, live while it runs ---------- */

  async function viewRun(gen, id) {
    return renderRun(gen, await api("/api/run", { id }));
  }

  function resultsTable(results) {
    const rows = [];
    for (const result of results || []) {
      const metrics = result.metrics && result.metrics.length ? result.metrics : [{}];
      metrics.forEach((m, i) => rows.push(el("tr", { "data-task": result.name },
        el("td", { class: "depth-" + Math.min(result.depth || 0, 3) }, i === 0 ? result.name : ""),
        el("td", {}, i === 0 ? result.kind : ""), el("td", { class: "num" }, i === 0 ? fmt(result.n_shot) : ""),
        el("td", { class: "num" }, i === 0 ? fmt(result.n_samples) : ""),
        el("td", {}, m.metric || ""), el("td", {}, m.filter || ""),
        el("td", { class: "num value" }, fmt(m.value)), el("td", { class: "num stderr" }, m.stderr === null || m.stderr === undefined ? "—" : "± " + fmt(m.stderr)))));
    }
    return table(["task / group", "kind", "n-shot", "samples", "metric", "filter", "value", "stderr"], rows, { id: "results" });
  }

  function manifestSection(manifest) {
    if (!manifest || !Object.keys(manifest).length) return null;
    const stages = manifest.stages || [];
    const cached = stages.filter((s) => s.cached).length;
    const rest = Object.fromEntries(Object.entries(manifest).filter(([k]) => !["inference", "stages", "workers", "code_execution"].includes(k)));
    return section("Manifest",
      manifest.inference ? [el("h3", {}, "Inference: answers from the cache and computed"), kvTable(manifest.inference)] : null,
      stages.length ? [el("h3", {}, "Stages — " + cached + " cached, " + (stages.length - cached) + " computed"),
        table(["task", "stage", "", "seconds"], stages.map((s) => el("tr", {}, el("td", {}, s.task), el("td", {}, s.stage),
          el("td", { class: s.cached ? "cached" : "computed" }, s.cached ? "cached" : "computed"), el("td", { class: "num" }, fmt(s.seconds)))), { id: "stages" })] : null,
      manifest.workers && Object.keys(manifest.workers).length ? [el("h3", {}, "Per server"), kvTable(manifest.workers)] : null,
      manifest.code_execution ? [el("h3", {}, "Code execution"), kvTable(manifest.code_execution)] : null,
      Object.keys(rest).length ? kvTable(rest) : null);
  }

  function renderRun(gen, run) {
    const live = el("section", { id: "live" });
    const view = el("div", { id: "run" },
      el("h1", {}, run.id, " ", badge(run.status)),
      el("p", { class: "muted" }, [modelLabel(run), run.date, run.layout, run.path].filter(Boolean).join(" · ")),
      run.partial ? el("p", { class: "note" }, run.partial) : null,
      run.left_out && run.left_out.length ? el("ul", { class: "note", id: "left-out" }, run.left_out.map((f) => el("li", {}, f.file + " left out: " + f.reason))) : null,
      el("div", { class: "links" },
        (run.samples || []).map((s) => el("a", { href: route("samples", run.id, s.task), "data-task": s.task }, "samples: " + s.task + " (" + s.count + ")")),
        run.layout === "lm-eval" ? null : el("a", { href: route("explain", run.id) }, "explain the cache"),
        el("a", { href: "#/wrong/" + encodeURIComponent(run.id) }, "always wrong")),
      run.status === "running" ? live : null,
      section("Results", run.results && run.results.length ? resultsTable(run.results) : el("p", { class: "muted" }, "No results yet.")),
      run.command ? section("Reproduce", el("pre", { id: "command" }, run.command)) : null,
      run.config_yaml ? section("Config snapshot", el("pre", { id: "config" }, run.config_yaml)) : null,
      run.layout === "lm-eval" ? el("p", { class: "muted", id: "no-manifest" }, "lm-eval's output folders have no manifest (evalflow's record of each stage and the cache), so this run has no manifest and no explain.") : manifestSection(run.manifest),
      run.trackers && run.trackers.length ? section("Trackers", el("ul", {}, run.trackers.map((t) => el("li", {}, externalLink(t.url, t.name))))) : null);
    if (run.status === "running") followLive(gen, run, live);
    return view;
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
    const s = Math.round(seconds);
    return s >= 3600 ? Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m" : s >= 60 ? Math.floor(s / 60) + "m " + (s % 60) + "s" : s + "s";
  }

  /** Poll /api/live every second while the run is running, updating its rows in place; once it
   *  stops running, fetch the run again and render it with its results (no page reload). */
  function followLive(gen, run, into) {
    if (MODE === "bundle") return;
    const state = el("p", { class: "muted", id: "live-state" }, "waiting for progress events…");
    const tasks = table(["task", "answered", "", "rate (req/s)", "ETA"], [], { id: "live-tasks" });
    const body = tasks.querySelector("tbody");
    const rows = new Map();
    into.replaceChildren(el("h2", {}, "Live"), state, tasks);
    function row(label) {
      if (!rows.has(label)) {
        const cells = { done: el("td", { class: "num done" }), bar: el("progress", { max: 1, value: 0 }), rate: el("td", { class: "num rate" }), eta: el("td", { class: "num eta" }) };
        body.append(el("tr", { "data-task": label }, el("td", {}, label), cells.done, el("td", {}, cells.bar), cells.rate, cells.eta));
        rows.set(label, cells);
      }
      return rows.get(label);
    }
    function update(progress) {
      if (!progress) return;
      state.textContent = progress.events + " events · updated " + (progress.updated || "—");
      for (const [label, p] of Object.entries(progress.tasks || {})) {
        const cells = row(label);
        cells.done.textContent = fmt(p.done) + " / " + fmt(p.total);
        cells.bar.setAttribute("max", String(p.total || 1));
        cells.bar.setAttribute("value", String(p.done || 0));
        cells.rate.textContent = fmt(p.rate);
        cells.eta.textContent = duration(p.eta_s);
      }
    }
    async function tick() {
      if (gen !== generation) return;
      let progress = null;
      try { progress = await api("/api/live", { id: run.id }); } catch (error) { state.textContent = "live: " + error.message; }
      if (gen !== generation) return;
      update(progress);
      if (progress && progress.status && progress.status !== "running") {
        try {
          const fresh = await api("/api/run", { id: run.id });
          if (gen === generation) main.replaceChildren(renderRun(gen, fresh));
          return;
        } catch (error) { state.textContent = "the run ended; reading it: " + error.message; }
      }
      setTimeout(tick, 1000);
    }
    update(run.progress);
    setTimeout(tick, 1000);
  }

  /* ---------- samples: a page of one task's samples ---------- */

  const SAMPLE_KEYS = ["filter", "metric", "value", "correct", "verdict", "has_image", "text", "offset", "limit"];

  async function viewSamples(gen, id, task, params) {
    const query = Object.fromEntries(SAMPLE_KEYS.map((k) => [k, params.get(k) || ""]));
    const [run, page] = await Promise.all([api("/api/run", { id }), api("/api/samples", { id, task, ...query })]);
    const go = (changes) => { location.hash = withQuery(route("samples", id, task), { ...query, offset: "", ...changes }); };
    const input = (key, placeholder) => { const box = el("input", { type: key === "text" ? "search" : "text", id: "q-" + key, name: key, placeholder, "aria-label": placeholder }); box.value = query[key]; return box; };
    const select = (key, options, label) => {
      const box = el("select", { id: "q-" + key, name: key, "aria-label": label }, options.map(([value, shown]) => el("option", { value }, shown)));
      box.value = query[key];
      return box;
    };
    const taskBox = el("select", { id: "q-task", "aria-label": "task" }, (run.samples || []).map((s) => el("option", { value: s.task }, s.task + " (" + s.count + ")")));
    taskBox.value = task;
    const applies = page.applies || { verdict: true, has_image: true };  // a run's index says which filters can match
    const fields = {
      text: input("text", "search prompts, answers, targets"),
      filter: page.filters && page.filters.length ? select("filter", [["", "any filter"], ...page.filters.map((f) => [f, "filter " + f])], "filter (pipeline)") : input("filter", "filter (pipeline)"),
      metric: select("metric", [["", "metric…"], ...(page.metrics || []).map((m) => [m, m])], "metric"), value: input("value", "metric value"),
      correct: select("correct", [["", "correct or not"], ["true", "correct"], ["false", "incorrect"]], "correct" + (page.correct_metric ? " (" + page.correct_metric + ")" : "")),
      verdict: page.verdicts && page.verdicts.length ? select("verdict", [["", "any verdict"], ...page.verdicts.map((v) => [v, "verdict " + v])], "judged verdict") : input("verdict", "judged verdict"),
      has_image: select("has_image", [["", "image or not"], ["true", "has an image"], ["false", "no image"]], "has image"),
    };
    if (!applies.verdict && !query.verdict) delete fields.verdict;
    if (!applies.has_image && !query.has_image) delete fields.has_image;
    const form = el("form", { class: "controls", id: "samples-form" }, taskBox, Object.values(fields), el("button", { type: "submit" }, "Apply"));
    form.addEventListener("submit", (event) => { event.preventDefault(); go(Object.fromEntries(Object.entries(fields).map(([k, box]) => [k, box.value]))); });
    taskBox.addEventListener("change", () => { location.hash = route("samples", id, taskBox.value); });
    for (const key of ["filter", "metric", "correct", "has_image", "verdict"]) if (fields[key] && fields[key].tagName === "SELECT") fields[key].addEventListener("change", () => form.requestSubmit());
    const offset = page.offset || 0, limit = page.limit || 50, metrics = page.metrics || [];
    const pager = el("div", { class: "pager" },
      offset > 0 ? el("a", { href: withQuery(route("samples", id, task), { ...query, offset: Math.max(0, offset - limit) }), id: "prev" }, "← previous") : null,
      el("span", { id: "samples-count" }, page.total ? (offset + 1) + "–" + Math.min(offset + limit, page.total) + " of " + page.total : "no samples match"),
      offset + limit < page.total ? el("a", { href: withQuery(route("samples", id, task), { ...query, offset: offset + limit }), id: "next" }, "next →") : null);
    const rows = (page.rows || []).map((r) => el("tr", { "data-doc": r.doc_id },
      el("td", {}, el("a", { href: withQuery(route("sample", id, task, r.doc_id), { filter: r.filter }) }, String(r.doc_id))),
      el("td", {}, r.filter), el("td", { class: "text" }, text(r.target)), el("td", { class: "text answer" }, text(r.answer)),
      metrics.map((m) => el("td", { class: "num" }, fmt((r.metrics || {})[m]))),
      el("td", {}, r.correct === true ? "✓" : r.correct === false ? "✗" : "—"), fields.verdict ? el("td", {}, r.verdict || "") : null, fields.has_image ? el("td", {}, r.has_image ? "image" : "") : null));
    return el("div", {},
      el("h1", {}, "Samples — ", task),
      el("p", {}, el("a", { href: route("run", id) }, "← " + id)),
      form, pager,
      page.bundle_docs ? el("p", { class: "note" }, SNAPSHOT + " holds the first " + page.bundle_docs + " documents of each task in full; open the run with evalflow view for the others.") : null,
      table(["doc", "filter", "target", "answer", ...metrics, "correct", ...(fields.verdict ? ["verdict"] : []), ...(fields.has_image ? [""] : [])], rows, { id: "samples" }));
  }

  /* ---------- one sample in full ---------- */

  async function viewSample(id, task, docId, filter) {
    let sample;
    try { sample = await api("/api/sample", { id, task, doc_id: docId, filter }); } catch (error) {
      if (MODE === "server") throw error;
      return el("div", {}, el("h1", {}, task + " — document " + docId), el("p", { class: "note", id: "left-out" }, SNAPSHOT + " does not hold this document in full (it holds the first documents of each task); open the run with evalflow view for the rest."));
    }
    const choices = sample.choices || null;
    let won = -1;
    if (choices) {
      won = choices.findIndex((c) => c.chosen);
      if (won < 0) choices.forEach((c, i) => { if (won < 0 || c.loglikelihood > choices[won].loglikelihood) won = i; });
    }
    return el("div", { id: "sample" },
      el("h1", {}, sample.task + " — document " + sample.doc_id + (sample.filter ? " (" + sample.filter + ")" : "")),
      el("p", {}, el("a", { href: route("samples", id, task) }, "← samples of " + task)),
      section("Metrics", kvTable(sample.metrics)),
      section("Target", el("pre", { id: "target" }, text(sample.target))),
      section("Prompt",
        sample.fewshot ? el("details", { id: "fewshot" }, el("summary", {}, "few-shot context"), pre(sample.fewshot)) : null,
        el("pre", { id: "prompt" }, text(sample.prompt))),
      choices ? section("Choices", table(["choice", "log-likelihood", "greedy", ""], choices.map((c, i) =>
        el("tr", { class: i === won ? "won" : null }, el("td", { class: "text" }, text(c.text)), el("td", { class: "num" }, fmt(c.loglikelihood)),
          el("td", {}, c.is_greedy ? "greedy" : ""), el("td", {}, i === won ? "won" : ""))), { id: "choices" })) : null,
      sample.generations ? section("Generation", sample.generations.map((g) => el("pre", { class: "generation" }, text(g)))) : null,
      sample.filtered ? section("Filtered outputs", sample.filtered.map((f) => el("pre", { class: "filtered" }, text(f)))) : null,
      sample.judge ? section("Judge", el("p", {}, "verdict: ", el("strong", {}, text(sample.judge.verdict))),
        el("h3", {}, "prompt"), pre(sample.judge.prompt), el("h3", {}, "rationale"), pre(sample.judge.rationale)) : null,
      sample.code ? section("Code execution", el("p", {}, "verdict: ", el("strong", {}, text(sample.code.verdict))), pre(sample.code.output)) : null,
      sample.images && sample.images.length ? section("Images", sample.images.map((image) => imageOf(id, image))) : null,
      el("details", {}, el("summary", {}, "the whole record"), pre(sample.raw)));
  }

  /** An image: in a bundle or report its PNG data URL (written from the run's cache), from the
   *  server the run's file by name or the cache's image by digest (the server checks both). */
  function imageOf(id, image) {
    const label = image.name ? "image " + image.name : "image " + (image.digest || "");
    const embedded = typeof image.src === "string" && image.src.startsWith("data:image/png;base64,");
    if (!embedded && (MODE !== "server" || !(image.name || image.digest))) return el("p", { class: "muted" }, label + " (its pixels are not in this copy)");
    const img = el("img", { class: "sample", alt: label, title: label });
    img.addEventListener("error", () => img.replaceWith(el("p", { class: "muted" }, label + ": not readable")));
    img.src = embedded ? image.src : apiPath("/api/image", { id, name: image.name || image.digest }).slice(1);
    return img;
  }

  /* ---------- compare, explain, across runs ---------- */

  /** The gate's words (max_drop, alpha) from the hash: a verdict is asked for only when given. */
  function gateForm(ids, gate) {
    if (MODE !== "server") return el("p", { class: "muted" }, "A gate (max_drop=, alpha=) needs the server: python -m evalflow view.");
    const box = (key, label, step) => { const b = el("input", { type: "number", id: "gate-" + key, name: key, step, placeholder: label, "aria-label": label }); b.value = gate[key]; return b; };
    const drop = box("max_drop", "max_drop (gate: the largest drop allowed)", "any"), alpha = box("alpha", "alpha (0.05)", "any");
    const form = el("form", { class: "controls", id: "gate-form" }, drop, alpha, el("button", { type: "submit" }, "Gate"));
    form.addEventListener("submit", (event) => { event.preventDefault(); location.hash = withQuery(route("compare", ...ids), { max_drop: drop.value, alpha: alpha.value }); });
    return form;
  }

  async function viewCompare(ids, params) {
    const gate = { max_drop: (params && params.get("max_drop")) || "", alpha: (params && params.get("alpha")) || "" };
    const data = await api("/api/compare", { ids: ids, ...(MODE === "server" ? gate : {}) });
    const gated = Boolean(data.gate);
    const [a, b] = ids;
    const flips = data.flips || { total: 0, rows: [] };
    const answers = (r) => el("div", { class: "side" },
      el("div", {}, el("div", { class: "muted" }, "A " + fmt(r.a)), el("pre", { class: "answer-a" }, text(r.answer_a))),
      el("div", {}, el("div", { class: "muted" }, "B " + fmt(r.b)), el("pre", { class: "answer-b" }, text(r.answer_b))));
    return el("div", { id: "compare" },
      el("h1", {}, "Compare"),
      el("ul", {}, (data.runs || []).map((r, i) => el("li", {}, i === 0 ? "A (baseline): " : i === 1 ? "B (candidate): " : "run " + (i + 1) + ": ",
        el("a", { href: route("run", r.id), title: r.id }, runLabel(r)), " ", el("span", { title: r.model }, "· " + modelLabel(r))))),
      el("p", {}, el("a", { href: "#/results/" + ids.map(encodeURIComponent).join(","), id: "results-link" }, "results side by side, one table per group")),
      gateForm(ids, gate),
      table(["task / group", "metric", "filter", "A", "B", "difference", "interval", "p-value", ...(gated ? ["verdict"] : [])], (data.rows || []).map((r) =>
        el("tr", { class: r.significant ? "significant" : null }, el("td", {}, r.name), el("td", {}, r.metric), el("td", {}, r.filter),
          el("td", { class: "num" }, fmt(r.a)), el("td", { class: "num" }, fmt(r.b)), el("td", { class: "num" }, fmt(r.difference)),
          el("td", { class: "num" }, "[" + fmt(r.low) + ", " + fmt(r.high) + "]"), el("td", { class: "num" }, fmt(r.p_value)), gated ? el("td", { class: "verdict" }, r.verdict) : null)), { id: "compare-rows" }),
      data.gate ? section("Gate", el("pre", { id: "gate" }, data.gate.join("\n"))) : null,
      section("Flipped documents — " + flips.total + (flips.total > flips.rows.length ? " (first " + flips.rows.length + " shown)" : ""),
        table(["task", "doc", "metric", "answers (A | B)", "target"], flips.rows.map((r) => el("tr", { "data-doc": r.doc_id },
          el("td", {}, r.task),
          el("td", {}, el("a", { href: withQuery(route("sample", a, r.task, r.doc_id), { filter: r.filter }) }, "A " + r.doc_id), " ",
            el("a", { href: withQuery(route("sample", b, r.task, r.doc_id), { filter: r.filter }) }, "B " + r.doc_id)),
          el("td", {}, r.metric), el("td", {}, answers(r)), el("td", { class: "text" }, text(r.target)))), { id: "flips" })));
  }

  async function viewExplain(id, against) {
    const [data, runs] = await Promise.all([api("/api/explain", { id, against }), api("/api/runs").catch(() => ({ runs: [] }))]);
    // lm-eval's folders have no manifest to explain against; a bundle offers only the runs it holds explain against
    const held = MODE !== "server" ? new Set(data.bundle_against || []) : null;
    const choices = (runs.runs || []).filter((r) => r.id !== id && r.layout !== "lm-eval" && (!held || held.has(r.id)));
    const choose = el("select", { id: "against", "aria-label": "explain against" },
      el("option", { value: "" }, "the closest earlier run (as evalflow explain finds it)"),
      choices.map((r) => el("option", { value: r.id }, r.id + (r.date ? " · " + r.date : ""))));
    choose.value = against || "";
    choose.addEventListener("change", () => { location.hash = withQuery(route("explain", id), { against: choose.value }); });
    const stages = data.stages || [];
    const cached = stages.filter((s) => s.cached).length;
    return el("div", { id: "explain" },
      el("h1", {}, "Explain — ", id),
      el("p", {}, el("a", { href: route("run", id) }, "← " + id)),
      el("div", { class: "controls" }, el("label", { for: "against" }, "against ", choose), data.against ? el("span", { class: "muted" }, "compared with " + data.against) : null),
      (data.compared || []).length ? el("ul", { id: "explain-compared" }, data.compared.map((c) => el("li", { "data-task": c.task }, c.task + ": compared with ",
        c.id ? el("a", { href: route("run", c.id) }, c.id) : c.path ? c.path : "no earlier run of it"))) : null,
      el("pre", { id: "explain-lines" }, (data.lines || []).join("\n")),
      section("Stages — " + cached + " cached, " + (stages.length - cached) + " computed",
        table(["task", "stage", ""], stages.map((s) => el("tr", {}, el("td", {}, s.task), el("td", {}, s.stage),
          el("td", { class: s.cached ? "cached" : "computed" }, s.cached ? "cached" : "computed"))), { id: "explain-stages" })));
  }

  async function viewAcross(ids) {
    const [wrong, reasoning] = await Promise.all([
      api("/api/wrong", { ids: ids }).catch((error) => ({ error: error.message })),
      api("/api/reasoning", { ids: ids }).catch((error) => ({ error: error.message }))]);
    const wrongPart = wrong.error ? el("p", { class: "error" }, wrong.error) : (wrong.tasks || []).map((t) => [el("h3", {}, t.task + " — " + t.docs.length + " documents"),
      table(["doc", "prompt", "target", ...ids], t.docs.map((d) => el("tr", { "data-doc": d.doc_id },
        el("td", {}, el("a", { href: route("sample", ids[0], t.task, d.doc_id) }, String(d.doc_id))), el("td", { class: "text" }, text(d.prompt)),
        el("td", { class: "text" }, text(d.target)), ids.map((id) => el("td", { class: "text" }, text((d.answers || {})[id]))))))]);
    return el("div", { id: "across" },
      el("h1", {}, "Across runs"),
      el("ul", {}, ids.map((id) => el("li", {}, el("a", { href: route("run", id) }, id)))),
      section("Documents every run gets wrong", wrongPart),
      section("Reasoning figures", reasoning.error ? el("p", { class: "error" }, reasoning.error) : reasoningPart(reasoning)));
  }

  /** The runs' results, one table per group, the runs side by side named by the settings that vary;
   *  for two runs also compare's paired columns, a significant row marked; leaf subtasks folded. */
  async function viewResults(ids) {
    const data = await api("/api/results", { ids: ids });
    const runs = data.runs || [];
    const paired = data.paired_columns || [];
    const headers = ["task / group", "metric", "", ...runs.map((r, i) => (runs.length === 2 ? (i ? "B: " : "A: ") : "") + r.label), ...paired];
    const line = (l) => el("tr", { class: l.significant ? "significant " + (l.direction || "") : null, "data-task": l.task },
      el("td", {}, l.name), el("td", {}, l.metric), el("td", { title: l.arrow === "↑" ? "higher is better" : "lower is better" }, l.arrow),
      (l.values || []).map((v) => el("td", { class: "num" }, v)), (l.paired || []).map((v) => el("td", { class: "num" }, v)));
    const sections = (data.sections || []).map((s) => el("section", { class: "results-group" },
      s.title ? el("h2", {}, s.title) : null,
      table(headers, s.head.map(line), { class: "results" }),
      s.folded.length ? el("details", {}, el("summary", {}, s.folded.length + " subtask rows" +
        (s.folded.some((l) => l.significant) ? " (" + s.folded.filter((l) => l.significant).length + " significant)" : "")),
      table(headers, s.folded.map(line), { class: "results" })) : null));
    return el("div", { id: "results" },
      el("h1", {}, "Results side by side"),
      el("ul", {}, runs.map((r, i) => el("li", {}, (runs.length === 2 ? (i ? "B (candidate): " : "A (baseline): ") : ""), el("strong", {}, r.label), " · ",
        el("a", { href: route("run", r.id) }, r.id), " · ", el("span", { class: "muted" }, r.folder), r.partial ? el("div", { class: "note" }, r.partial) : null,
        r.gate && r.gate.length ? el("pre", { class: "gate" }, r.gate.join("\n")) : null))),
      runs.length === 2 ? el("p", {}, el("a", { href: route("compare", runs[0].id, runs[1].id) }, "compare: the documents that flipped")) : null,
      paired.length ? el("p", { class: "muted" }, "B − A with its 95% interval and p; rows with p < " + data.significant + " are marked (uncorrected).") : null,
      data.compare_error ? el("p", { class: "note" }, "no paired columns: " + data.compare_error) : null,
      (data.notes || []).map((n) => el("p", { class: "note" }, n)),
      sections);
  }

  /** Per run: its tokens and cost lines, then per task the stop reasons, truncated share and cost. */
  function reasoningPart(reasoning) {
    if (!Array.isArray(reasoning.runs)) return renderValue(reasoning);
    return reasoning.runs.map((r) => el("div", { class: "reasoning" },
      el("h3", {}, String(r.id) + (r.model ? " · " + r.model : "")),
      r.note ? el("p", { class: "muted" }, r.note) : null,
      r.lines && r.lines.length ? el("pre", {}, r.lines.join("\n")) : null,
      r.tasks && r.tasks.length ? renderValue(r.tasks) : null));
  }

  /* ---------- start ---------- */

  document.getElementById("mode").textContent = MODE === "bundle" ? "static bundle" : MODE === "single" ? "report (one file)" : "";
  window.addEventListener("hashchange", render);
  const START = document.querySelector('meta[name="evalflow-start"]');
  const start = START && MODE === "single" ? String(START.getAttribute("content")) : "";
  if (!location.hash) history.replaceState(null, "", start.startsWith("#/") ? start : "#/runs");
  render();
})();
