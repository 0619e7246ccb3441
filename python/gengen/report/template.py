"""The report's HTML template (jinja2, rendered with autoescaping: every name from user data is escaped)."""

from __future__ import annotations

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1400px;
       padding: 0 1em; color: #1a1a1a; background: #ffffff; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.1em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
.warning { background: #fff4e5; border-left: 4px solid #e69500; padding: 0.4em 0.8em; margin: 0.3em 0; }
.note { color: #555; font-size: 0.9em; }
figcaption { color: #555; font-size: 0.85em; }
</style>
</head>
<body>
{% macro render(t) -%}
{% if t.rows %}<div class="scroll"><table>
<tr>{% for column in t.columns %}<th>{{ column }}</th>{% endfor %}</tr>
{% for row in t.rows %}<tr>{% for cell, numeric in row %}
<td{% if numeric %} class="num"{% endif %}>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table></div>{% else %}<p class="note">{{ t.empty }}</p>{% endif %}
{%- endmacro %}
<h1>{{ title }}</h1>
<p class="note">Generated {{ generated }} by gengen {{ versions.get("gengen", "?") }}.
ID test set <strong>{{ settings.id_testset }}</strong> ({{ settings.id_metric }});
{{ settings.ood_resolved | length }} OOD test sets ({{ settings.metric }});
mode {{ settings.mode_resolved }}; fit {{ settings.fit }}; {{ settings.method }} correlation;
p-values adjusted with {{ settings.adjust }} (from {{ settings.primary_p }}),
significance at {{ settings.alpha }}.</p>

{% if warnings %}
<h2>Warnings</h2>
{% for warning in warnings %}<div class="warning">{{ warning }}</div>
{% endfor %}
{% endif %}

<h2>Summary</h2>
{{ render(tables.summary) }}

<h2>Partial correlations per group</h2>
{% for figure in figures.heatmaps %}
<figure><img alt="{{ figure.alt }}" src="data:image/png;base64,{{ figure.data }}">
<figcaption>{{ figure.caption }}</figcaption></figure>
{% endfor %}

<h2>Across groups</h2>
{% if comparison_text %}<p>{{ comparison_text }}</p>{% endif %}
{% for figure in figures.agreement %}
<figure><img alt="{{ figure.alt }}" src="data:image/png;base64,{{ figure.data }}">
<figcaption>{{ figure.caption }}</figcaption></figure>
{% endfor %}
{{ render(tables.agreement) }}
<h3>Conflicting pairs (significantly positive in one group, significantly negative in another)</h3>
{{ render(tables.conflicts) }}

{% if tables.pooled %}
<h2>Pooled across runs (Fisher-z meta-analysis)</h2>
<p class="note">Strongest random-effects estimates; the full table is pooled.csv.</p>
{{ render(tables.pooled) }}
{% endif %}

{% for group in groups %}
<h2>{{ group.label }}</h2>
<h3>Strongest pairs</h3>
{{ render(group.table) }}
{% for figure in group.figures %}
<figure><img alt="{{ figure.alt }}" src="data:image/png;base64,{{ figure.data }}">
<figcaption>{{ figure.caption }}</figcaption></figure>
{% endfor %}
{% endfor %}

<h2>Settings</h2>
<table>
<tr><th>setting</th><th>value</th></tr>
{% for key, value in settings_rows %}<tr><td>{{ key }}</td><td>{{ value }}</td></tr>
{% endfor %}
</table>
<h2>Package versions</h2>
<table>
<tr><th>package</th><th>version</th></tr>
{% for key, value in versions.items() %}<tr><td>{{ key }}</td><td>{{ value }}</td></tr>
{% endfor %}
</table>
</body>
</html>
"""
