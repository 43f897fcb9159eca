"""The page template of ``report``: plain HTML and CSS around the charts (which vega-embed draws
from their specs), in Jinja2 with autoescaping so names and notes show as text, never markup.

The Vega bundle and the chart script come last in the body, so the results tables paint before
the ~1 MB of JavaScript is compiled. Each task's documents are a ``<script
type="application/gzip+base64">`` blob that the browser neither parses nor runs; opening the
task's ``<details>`` (or a link to ``#docs-<task>``) decodes it with the browser's own
``DecompressionStream`` and builds the table with ``textContent``, so prompts and answers are
never markup there either. The "disagreements only" filter is CSS alone: a checkbox whose
``:checked`` state hides the rows the runs scored alike.
"""

from __future__ import annotations

import jinja2

_TEMPLATE = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>evalflow report</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
table.results th { background: #1f4e79; color: #fff; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.name { white-space: pre; }
pre { white-space: pre-wrap; margin: 0; max-width: 60em; max-height: 12em; overflow: auto; }
figure { display: inline-block; margin: 4px 6px 0 0; } figcaption { font-size: 75%; color: #555; }
tr.disagree { background: #fff4e0; }
table.results { table-layout: fixed; }
table.results col.name { width: 22em; } table.results col.value { width: 10em; }
tr.significant td { font-weight: 600; } tr.better td { background: #e3f4e1; } tr.worse td { background: #fbe3e1; }
details.subtasks, details.task-docs { margin: 0 0 1em; } summary { cursor: pointer; }
.left-out { color: #8a4b00; }
#disagree-only:checked ~ .documents tr.agree { display: none; }
.note { color: #666; font-size: 0.85em; }
</style>
</head>
<body>
<h1>evalflow report</h1>
<p class="note">{% for run in runs %}<b>{{ run.label }}</b>: {{ run.folder }} ({{ run.kind }}
{%- if run.paths %}; {{ run.paths }}{% endif %}{% if run.partial %}; <b>{{ run.partial }}</b>{% endif %}
{%- for line in run.gate %}; {{ line }}{% endfor %}){% if not loop.last %}; {% endif %}{% endfor %}</p>
{% macro results_table(lines) %}
<table class="results">
<colgroup><col class="name"><col><col>{% for label in labels %}<col class="value">{% endfor %}
{%- for col in paired_columns %}<col>{% endfor %}</colgroup>
<tr><th>Task</th><th>Filter</th><th>Metric</th>
{%- for label in labels %}<th>{% if paired_columns %}{{ 'AB'[loop.index0] }}: {% endif %}{{ label }}</th>{% endfor %}
{%- for col in paired_columns %}<th>{{ col }}</th>{% endfor %}</tr>
{% for line in lines %}<tr class="{{ 'significant ' ~ line.direction if line.significant else '' }}">
{{- '' }}<td class="name">{{ line.name }}</td><td>{{ line.metric.split(',', 1)[1] }}</td>
{{- '' }}<td>{{ line.metric.split(',', 1)[0] }} {{ line.arrow }}</td>
{% for value in line.values %}<td class="num">{{ value }}</td>{% endfor %}
{%- for cell in line.paired %}<td class="{{ 'num' if loop.index in (1, 3, 5) else '' }}">{{ cell }}
{%- if loop.index == 3 and line.significant %} *{% endif %}</td>{% endfor %}
{%- if paired_columns and not line.paired %}{% for col in paired_columns %}<td></td>{% endfor %}{% endif %}</tr>
{% endfor %}</table>
{% endmacro %}
<h2>Results{% if paired_columns %} — Paired comparison: {{ labels[1] }} (B) vs {{ labels[0] }} (A){% endif %}</h2>
{% if paired_columns %}<p class="note">* marks p &lt; {{ significant }}
{{- ' (green: B better, red: B worse; not corrected for the number of rows tested).' }}
{{- ' Subtasks are folded under their group.' }}</p>{% endif %}
{% if compare_error %}<p class="note left-out">Not paired: {{ compare_error }}</p>{% endif %}
{% for note in results_notes %}<p class="note left-out">{{ note }} (— in the other runs' columns)</p>{% endfor %}
{% for section in sections %}
<section class="group">
{% if section.title %}<h3>{{ section.title }}</h3>{% endif %}
{{ results_table(section.head) }}
{% if section.folded %}<details class="subtasks"><summary>
{{- section.folded | map(attribute='task') | unique | list | length }} subtasks
{%- if section.folded_significant %}, {{ section.folded_significant }} row(s) marked *{% endif %}</summary>
{{ results_table(section.folded) }}
</details>{% endif %}
</section>
{% endfor %}

{% for chart in charts %}
<h2>{{ chart.title }}</h2>
{% if chart.spec %}<div class="chart" id="{{ chart.id }}"></div>{% endif %}
{% endfor %}

{% if documents or document_notes %}
<h2>Documents</h2>
{% for note in document_notes %}<p class="note left-out">{{ note }}</p>{% endfor %}
{% if documents %}
<p class="note">Open a task to see its documents (they are decoded from the page when opened).</p>
<input type="checkbox" id="disagree-only"{% if runs|length < 2 %} disabled{% endif %}>
<label for="disagree-only">only documents where the runs disagree</label>
<div class="documents">
{% for view in documents %}
<details class="task-docs" id="docs-{{ view.task }}" data-blob="blob{{ loop.index0 }}">
<summary>{{ view.task }} <span class="note">({{ view.n }} documents
{%- if view.columns|length > 1 %}, {{ view.disagree }} where the runs disagree{% endif %}
{{- '' }}; filter {{ view.filter }})</span></summary>
<div class="doc-table"></div>
</details>
<script type="application/gzip+base64" id="blob{{ loop.index0 }}">{{ view.blob }}</script>
{% endfor %}
</div>
{% endif %}
{% endif %}

<script>{{ bundle | safe }}</script>
<script>
const charts = [
{%- for chart in charts if chart.spec %}["#{{ chart.id }}", {{ chart.spec | safe }}]{% if not loop.last %}, {% endif %}
{%- endfor %}];
for (const [target, spec] of charts) {
  vegaEmbed(target, spec, {renderer: "svg", actions: false}).catch(console.error);
}
{{ docs_js | safe }}
</script>
</body>
</html>
"""

_DOCS_JS = """\
async function decodeDocs(id) {  // base64 -> gzip -> JSON, as report_docs.encode_docs wrote it
  const bytes = Uint8Array.from(atob(document.getElementById(id).textContent), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}
function addCell(row, text, pre) {
  const td = row.insertCell();
  if (!pre) { td.textContent = text; return; }
  const block = document.createElement("pre");
  block.textContent = text;
  td.append(block);
}
function addImages(td, images) {  // an image task's thumbnails under its prompt (data: URLs, no markup)
  for (const im of images) {
    const fig = document.createElement("figure");
    if (im.src) { const img = document.createElement("img"); img.src = im.src; img.alt = im.label; fig.append(img); }
    const cap = document.createElement("figcaption");
    cap.textContent = im.label;
    fig.append(cap);
    td.append(fig);
  }
}
async function showDocs(details) {
  if (details.dataset.shown) return;
  details.dataset.shown = "1";
  const {columns, docs} = await decodeDocs(details.dataset.blob);
  const table = document.createElement("table");
  table.className = "docs";
  const head = table.insertRow();
  for (const name of ["doc", "prompt", "target", ...columns.flatMap(c => [c + ": answers", "filtered", "scores"])]) {
    const th = document.createElement("th");
    th.textContent = name;
    head.append(th);
  }
  for (const doc of docs) {
    const row = table.insertRow();
    row.className = doc.disagree ? "disagree" : "agree";
    row.dataset.doc = doc.doc_id;
    addCell(row, doc.doc_id); addCell(row, doc.prompt, true);
    addImages(row.cells[1], doc.images || []); addCell(row, doc.target);
    for (const r of doc.runs) { addCell(row, r.resps, true); addCell(row, r.filtered); addCell(row, r.scores); }
  }
  details.querySelector(".doc-table").replaceChildren(table);
}
for (const details of document.querySelectorAll("details.task-docs")) {
  details.addEventListener("toggle", () => { if (details.open) showDocs(details).catch(console.error); });
}
function openFromHash() {  // report.html#docs-<task> opens that task's documents
  const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if (target && target.matches("details.task-docs")) target.open = true;
}
window.addEventListener("hashchange", openFromHash);
openFromHash();
"""

PAGE = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
    _TEMPLATE, globals={"docs_js": _DOCS_JS}
)
