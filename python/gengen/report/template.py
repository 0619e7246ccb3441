"""The report's HTML template (jinja2, rendered with autoescaping: every name from user data is escaped).

The page is one file: figures inline as base64 PNG, interactive parts (tables, heatmaps, trajectories) built by
the script in :mod:`gengen.report.assets` from one JSON block, nothing loaded from the network.
"""

from __future__ import annotations

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>{{ css | safe }}</style>
</head>
<body>
{% macro render(t) -%}
{% if t.rows %}<div class="scroll"><table>
<tr>{% for column in t.columns %}<th>{{ column }}</th>{% endfor %}</tr>
{% for row in t.rows %}<tr>{% for cell, numeric in row %}
<td{% if numeric %} class="num"{% endif %}>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table></div>{% else %}<p class="note">{{ t.empty }}</p>{% endif %}
{%- endmacro %}
{% macro settings_table(rows) -%}
<table class="settings"><tr><th>setting (as these rows used it)</th><th>value</th></tr>
{% for key, value in rows %}<tr><td>{{ key }}</td><td>{{ value }}</td></tr>
{% endfor %}</table>
{%- endmacro %}
{% macro figure(f) -%}
<figure><img alt="{{ f.alt }}" width="{{ f.width }}" src="data:image/png;base64,{{ f.data }}">
<figcaption>{{ f.caption }}</figcaption></figure>
{%- endmacro %}
<h1>{{ title }}</h1>
<p class="note">Generated {{ generated }} by gengen {{ versions.get("gengen", "?") }}.
ID test set <strong>{{ settings.id_testset }}</strong> ({{ settings.id_metric }});
{{ settings.ood_resolved | length }} OOD test sets ({{ settings.metric }});
{{ n_groups }} group{{ "s" if n_groups != 1 }};
mode {{ settings.mode_resolved }}; fit {{ settings.fit }}; {{ settings.method }} correlation;
significance from {{ deciding }}{% if deciding_note %} ({{ deciding_note }}){% endif %}, adjusted with
{{ settings.adjust }} at {{ settings.alpha }}.
Tables and figures need JavaScript for searching, sorting and hovering; the full tables are pairs.csv
and pooled.csv, the figures are also in {{ figure_folder }}/ as PNG and SVG.</p>
{% if verdict %}<section id="verdict" class="verdict">
<h2>Verdict</h2>
{% if across_answer %}<p class="verdict-answer">{{ across_answer.answer }}</p>
<p>{{ across_answer.heading }}:</p><ul>{% for example in across_answer.examples %}<li>{{ example }}</li>
{% endfor %}</ul>
<p class="note">The verdict across models needs per-run partial correlations over checkpoints; this analysis has
one score per run, so it answers across runs instead. Every pair: the Across runs section below and pairs.csv.</p>
{% else %}
<p class="verdict-answer">{{ verdict.answer }}</p>
{% if verdict.text and verdict.text != verdict.answer %}<p class="verdict-text">{{ verdict.text }}</p>{% endif %}
<table class="verdict-counts"><tr><th>pairs</th><th>count</th><th>strongest examples</th></tr>
{% for row in verdict.rows %}<tr><td>{{ row.name }}</td><td class="num">{{ row.count }}</td>
<td>{% for example in row.examples %}{{ example }}{% if not loop.last %}<br>{% endif %}{% endfor %}</td></tr>
{% endfor %}</table>
{% if verdict.agreement %}<p class="note">{{ verdict.agreement }}</p>{% endif %}
<p class="note">Every pair's class, estimates and tests: verdict_pairs.csv; the across-model tests of each pair:
compare_heterogeneity.csv and compare_differences.csv.</p>
{% endif %}
</section>{% endif %}
{% for pair in pairs %}<section id="{{ pair.anchor }}">
<h2>Pair {{ pair.label }}</h2>
{{ figure(pair.figure) }}
{% for title, table in pair.tables %}<h3>{{ title }}</h3>
{{ render(table) }}
{% endfor %}<p class="note">The pair's residual scatter in each group: Residuals and trajectories per group.</p>
</section>
{% endfor %}
<noscript><p class="warning">JavaScript is off: the tables, heatmaps and trajectories below stay empty.
Read pairs.csv and the figures in {{ figure_folder }}/ instead.</p></noscript>
<nav><ul>
{% for anchor, label in contents %}<li><a href="#{{ anchor }}">{{ label }}</a></li>
{% endfor %}</ul></nav>

{% if warnings %}
<h2 id="warnings">Warnings ({{ warnings | length }})</h2>
{% for warning in warnings[:5] %}<div class="warning">{{ warning }}</div>
{% endfor %}
{% if warnings | length > 5 %}<details><summary>{{ warnings | length - 5 }} more</summary>
{% for warning in warnings[5:] %}<div class="warning">{{ warning }}</div>
{% endfor %}</details>{% endif %}
{% endif %}

<h2 id="summary">Summary</h2>
{{ render(tables.summary) }}

{% for section in sections %}
<h2 id="{{ section.anchor }}">{{ section.heading }}</h2>
<p class="note">{{ section.note }}</p>
<h3>Settings</h3>
{{ settings_table(section.settings) }}
<h3>Partial correlations</h3>
<p class="note">Test sets in the order of an average-linkage clustering of the panels' mean partial
correlation (Fisher z), the same order in every panel{% if section.stripped %}; labels omit the
prefix{{ "es" if section.stripped | length > 1 }}
{% for prefix in section.stripped %}<code>{{ prefix }}</code>{{ ", " if not loop.last }}{% endfor %}{% endif %}.
Hover a cell for the full names and values; a dot marks pairs significant after adjustment.</p>
<div data-heatmap="{{ section.key }}"></div>
<h3>Pairs</h3>
<p class="note">Every pair of every group. p_deciding is the unadjusted p-value behind <em>significant</em>
(its method in p_deciding_method); the interval's method is ci_method; diagnostics says where a row's assumptions
look doubtful. Click a header to sort; type to search.</p>
<div class="dt" data-table="{{ section.key }}"></div>
{% endfor %}

{% if comparison %}
<h2 id="across-groups">Across groups</h2>
<p>{{ comparison.text }}</p>
{% if comparison.levels %}<p class="note">{{ comparison.levels }}</p>{% endif %}
<div class="figrow">{% for f in comparison.figures %}{{ figure(f) }}{% endfor %}</div>
<div class="dt" data-table="agreement"></div>
<h3>Conflicting pairs (significantly positive in one group, significantly negative in another)</h3>
{% if comparison.conflicts %}<div class="dt" data-table="conflicts"></div>{% else %}<p class="note">none</p>{% endif %}
{% endif %}

{% if pooled %}
<h2 id="pooled">Pooled across runs (meta-analysis)</h2>
<p class="note">Per-run estimates pooled per cell; the columns are those of pooled.csv.</p>
<h3>Settings</h3>
{{ settings_table(pooled.settings) }}
<div class="dt" data-table="pooled"></div>
{% endif %}

{% if trajectories %}
<h2 id="trajectories">Scores over training</h2>
<p class="note">One panel per test set (the ID test set first, framed), one line per run: a model's colour
by its size, its runs (seeds) in lighter shades and dash patterns, named in the legend (above 12 runs, each model's
median run and the band of its runs instead, every run on demand). The horizontal axis is
training progress, each run's step divided by its own last step (0.1% to 100%, logarithmic), so that runs of
different lengths share it; each run's last step is in the legend. {{ trajectories.direction }} Hover a panel
or line for its full name and step. The same as a static figure: {{ figure_folder }}/scores_over_training.png
and .svg.</p>
<div data-trajectories="scores"></div>
{% endif %}

{% if groups %}
<h2 id="residuals">Residuals and trajectories per group</h2>
{% if groups_left_out %}<p class="note">Figures for {{ groups | length }} groups (each model's first run first);
{{ groups_left_out }} more are in the tables, heatmaps and trajectories above but get no figures of their own.</p>
{% endif %}
<p class="note">One group per fold (click to open); the first {{ groups_open }} open.</p>
{% for group in groups %}
<details class="group"{% if loop.index <= groups_open %} open{% endif %}>
<summary><h3>{{ group.label }}</h3></summary>
{% for f in group.figures %}{{ figure(f) }}{% endfor %}
</details>
{% endfor %}
{% endif %}

<h2 id="settings">Options as requested</h2>
<p class="note">What the analysis was asked for; each section's Settings above say what its rows actually used.</p>
<table>
<tr><th>setting</th><th>value</th></tr>
{% for key, value in settings_rows %}<tr><td>{{ key }}</td><td>{{ value }}</td></tr>
{% endfor %}
</table>
<h2 id="versions">Package versions</h2>
<table>
<tr><th>package</th><th>version</th></tr>
{% for key, value in versions.items() %}<tr><td>{{ key }}</td><td>{{ value }}</td></tr>
{% endfor %}
</table>
<script type="application/json" id="gengen-data">{{ payload | safe }}</script>
<script>{{ script | safe }}</script>
</body>
</html>
"""
