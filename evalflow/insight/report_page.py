"""The page template of ``report``: plain HTML and CSS around the charts (which vega-embed draws
from their specs), in Jinja2 with autoescaping so prompts and answers show as text, never markup.

The "disagreements only" filter is CSS alone: a checkbox whose ``:checked`` state hides the rows
both runs scored alike.
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
tr.disagree { background: #fff4e0; }
#disagree-only:checked ~ .documents tr.agree { display: none; }
.note { color: #666; font-size: 0.85em; }
</style>
<script>{{ bundle | safe }}</script>
</head>
<body>
<h1>evalflow report</h1>
<p class="note">{% for run in runs %}<b>{{ run.label }}</b>: {{ run.folder }} ({{ run.kind }}){% if not loop.last %}; {% endif %}{% endfor %}</p>

<h2>Results</h2>
{% for run in runs %}
<h3>{{ run.label }}</h3>
<table class="results">
<tr>{% for col in result_columns %}<th>{{ col }}</th>{% endfor %}</tr>
{% for row in run.rows %}<tr>{% for cell in row %}<td class="{{ 'name' if loop.first else ('num' if loop.index in (2, 4, 7, 9) else '') }}">{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% endfor %}

{% if comparison or compare_error %}
<h2>Paired comparison: {{ labels[1] }} vs {{ labels[0] }}</h2>
{% if compare_error %}<p class="note">{{ compare_error }}</p>{% endif %}
{% if comparison %}
<table class="comparison">
<tr>{% for col in compare_columns %}<th>{{ col }}</th>{% endfor %}</tr>
{% for row in comparison %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% endif %}
{% endif %}

{% for chart in charts %}
<h2>{{ chart.title }}</h2>
<div class="chart" id="{{ chart.id }}"></div>
{% endfor %}

{% if documents %}
<h2>Documents</h2>
<input type="checkbox" id="disagree-only"{% if runs|length < 2 %} disabled{% endif %}>
<label for="disagree-only">only documents where the runs disagree</label>
<div class="documents">
{% for view in documents %}
<h3>{{ view.task }} <span class="note">(filter {{ view.filter }}{% if view.left_out %}; {{ view.left_out }} more documents not shown{% endif %})</span></h3>
<table class="docs">
<tr><th>doc</th><th>prompt</th><th>target</th>{% for label in labels %}<th>{{ label }}: answers</th><th>filtered</th><th>scores</th>{% endfor %}</tr>
{% for doc in view.docs %}<tr class="{{ 'disagree' if doc.disagree else 'agree' }}"><td>{{ doc.doc_id }}</td><td><pre>{{ doc.prompt }}</pre></td><td>{{ doc.target }}</td>
{% for r in doc.runs %}<td><pre>{{ r.resps }}</pre></td><td>{{ r.filtered }}</td><td>{{ r.scores }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% endfor %}
</div>
{% endif %}

<script>
const charts = [{% for chart in charts %}["#{{ chart.id }}", {{ chart.spec | safe }}]{% if not loop.last %}, {% endif %}{% endfor %}];
for (const [target, spec] of charts) {
  vegaEmbed(target, spec, {renderer: "svg", actions: false}).catch(console.error);
}
</script>
</body>
</html>
"""

PAGE = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(_TEMPLATE)
