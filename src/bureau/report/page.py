"""`bureau report RUN`: one self-contained HTML page of a run (styles, script and SVG charts
inline; nothing is fetched).

A training run gets reward and Pass@1 over steps (the trained rollouts with task-resampled
bands, the held-out evaluations with their intervals), per-domain and per-template bars, the
error taxonomy, stop reasons, staleness, the sampler/trainer mismatch, throughput and trainer
wait, weight-sync times and the resolved config. An evaluation, a pre-evaluation or a harness
check gets what it has: the summary with intervals, domains, templates, pass@k, the taxonomy,
stop reasons, turns and tokens.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bureau.evaluation.report import EvalReport, GroupReport
from bureau.report.charts import Chart, Series, bars, histogram, lines
from bureau.report.run import Run, TrialSet, load_run

REPORT_FILE = "report.html"

STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0;
       color: #222; background: #fafafa; }
header { background: #1f2a44; color: #fff; padding: 18px 32px; }
header h1 { margin: 0 0 6px 0; font-size: 22px; }
header dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0;
            font-size: 13px; }
header dt { opacity: 0.7; } header dd { margin: 0; word-break: break-all; }
main { padding: 12px 32px 40px; max-width: 1500px; }
section { margin-top: 22px; }
h2 { font-size: 18px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(620px, 1fr)); gap: 16px; }
figure.chart { margin: 0; background: #fff; border: 1px solid #e3e3e3; border-radius: 6px;
               padding: 8px; }
figure.chart figcaption { font-weight: 600; font-size: 14px; margin-bottom: 4px; }
figure.chart svg { width: 100%; height: auto; }
figure.chart p.note { font-size: 12px; color: #555; margin: 4px 0 0 0; }
table { border-collapse: collapse; font-size: 13px; background: #fff; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; }
th { background: #f0f0f0; cursor: pointer; user-select: none; }
td:first-child, th:first-child { text-align: left; }
pre { background: #fff; border: 1px solid #e3e3e3; padding: 10px; font-size: 12px;
      overflow-x: auto; }
p.empty { color: #777; font-style: italic; }
"""

# The page checks itself once loaded: script errors, and per chart the data points that
# rendered with a size (`data-rendered`, against `data-points`); tables sort by a header click.
SCRIPT = """
(function () {
  var root = document.documentElement, errors = 0;
  root.setAttribute("data-script-errors", "0");
  window.addEventListener("error", function () {
    errors += 1; root.setAttribute("data-script-errors", String(errors));
  });
  function count(figure) {
    var n = 0;
    figure.querySelectorAll('g[id*="pts-"]').forEach(function (g) {
      var box = g.getBBox();
      if (box.width > 0 || box.height > 0) { n += g.querySelectorAll("use").length || 1; }
    });
    return n;
  }
  function sortable(table) {
    table.querySelectorAll("th").forEach(function (th, column) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var down = th.getAttribute("data-down") !== "1";
        th.setAttribute("data-down", down ? "1" : "0");
        rows.sort(function (a, b) {
          var x = a.cells[column].getAttribute("data-value") || a.cells[column].textContent;
          var y = b.cells[column].getAttribute("data-value") || b.cells[column].textContent;
          var nx = parseFloat(x), ny = parseFloat(y);
          var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
          return down ? -c : c;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }
  window.addEventListener("DOMContentLoaded", function () {
    var charts = document.querySelectorAll("figure.chart"), drawn = 0;
    charts.forEach(function (figure) {
      var n = count(figure);
      figure.setAttribute("data-rendered", String(n));
      drawn += n;
    });
    document.querySelectorAll("table.sortable").forEach(sortable);
    document.body.setAttribute("data-charts", String(charts.length));
    document.body.setAttribute("data-points-rendered", String(drawn));
    document.body.setAttribute("data-ready", "1");
  });
})();
"""


def write_report(run_folder: Path, out: Path | None = None) -> Path:
    """Read the run and write its page (default `RUN/report.html`); returns the path."""
    run = load_run(run_folder)
    out = out or run.path / REPORT_FILE
    out.write_text(render(run), encoding="utf-8")
    return out


def render(run: Run) -> str:
    sections: list[str] = []
    if run.kind == "train":
        sections += _train_sections(run)
    else:
        sections += _eval_sections(run)
    sections.append(_outcomes_section(run))
    sections.append(_config_section(run))
    title = {
        "train": "Training run",
        "eval": "Evaluation",
        "preeval": "Pre-evaluation",
        "check": "Harness check",
    }[run.kind]
    facts = "".join(
        f"<dt>{_e(k)}</dt><dd>{_e(str(v))}</dd>"
        for k, v in {"run folder": str(run.path), **run.facts}.items()
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>bureau: {_e(title)} {_e(run.path.name)}</title>"
        f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body>"
        f"<header><h1>bureau · {_e(title)}</h1><dl>{facts}</dl></header>"
        f"<main>{''.join(sections)}</main></body></html>\n"
    )


# --- training runs -------------------------------------------------------------------------


def _column(steps: Sequence[dict[str, Any]], key: str) -> list[float | None]:
    values: list[float | None] = []
    for row in steps:
        value = row.get(key)
        values.append(float(value) if isinstance(value, int | float) else None)
    return values


# Per-step lines read from metrics.jsonl: (chart, title, [(label, key, axis)], y labels).
STEP_LINES: tuple[tuple[str, str, list[tuple[str, str, int]], str, str], ...] = (
    ("mismatch", "Sampler vs trainer: mismatch KL and |Δ logprob|",
     [("mismatch KL", "mismatch_kl", 0), ("mean |Δ logprob|", "abs_logprob_diff", 1)],
     "KL", "|Δ logprob|"),
    ("throughput", "Throughput and trainer wait",
     [("sampled tokens/s", "perf/sampled_tokens_per_s", 0),
      ("trainer tokens/s", "train/tokens_per_s", 0),
      ("trainer wait (share of the step)", "perf/trainer_wait_ratio", 1)],
     "tokens/s", "share"),
    ("weight-sync", "Weight sync",
     [("sync (s)", "weights/sync_s", 0), ("export (s)", "weights/export_s", 0),
      ("engine update (s)", "weights/engine_update_s", 0)],
     "seconds", ""),
)  # fmt: skip


def _train_sections(run: Run) -> list[str]:
    steps = run.steps
    x = [int(r["step"]) for r in steps]
    out = [_summary_train(run)]
    charts: list[Chart | None] = []
    by_step = {s.step: s.overall for s in run.step_intervals}
    pass_low = [_rate_bound(by_step.get(s), "low") for s in x]
    pass_high = [_rate_bound(by_step.get(s), "high") for s in x]
    reward_low = [_mean_bound(by_step.get(s), "low") for s in x]
    reward_high = [_mean_bound(by_step.get(s), "high") for s in x]
    series = [
        Series("trained rollouts: reward", x, _column(steps, "rollout/reward"), reward_low,
               reward_high),
        Series("trained rollouts: Pass@1", x, _column(steps, "rollout/pass_at_1"), pass_low,
               pass_high),
    ]  # fmt: skip
    if run.evals:
        ex = [int(e.get("version", 0)) for e in run.evals]
        held = "held-out" if all(e.get("held_out", True) for e in run.evals) else "evaluation"
        series.append(
            Series(
                f"{held}: Pass@1",
                ex,
                [e.get("pass_at_1") for e in run.evals],
                [e.get("pass_at_1_low") for e in run.evals],
                [e.get("pass_at_1_high") for e in run.evals],
                line=False,
            )
        )
        series.append(Series(f"{held}: reward", ex, [e.get("reward") for e in run.evals],
                             line=False, marker="D"))  # fmt: skip
    charts.append(
        lines(
            "reward",
            "Reward and Pass@1 over steps",
            series,
            ylim=(-0.02, 1.02),
            note="Bands and whiskers: 95% intervals that resample tasks. Trained rollouts: the "
            "groups each step trained on; held-out: the loop's evaluations (step 0 = before "
            "training).",
        )
    )
    ages: Counter[int] = Counter()
    for row in steps:
        for key, value in row.items():
            if key.startswith("train/staleness_tokens/"):
                ages[int(key.rsplit("/", 1)[1])] += int(value)
    if ages:
        keys = sorted(ages)
        charts.append(
            bars(
                "staleness-tokens",
                "Staleness of trained tokens",
                [str(k) for k in keys],
                [Series("tokens", keys, [float(ages[k]) for k in keys])],
                ylabel="tokens trained (all steps)",
                note="Weight versions between the policy that sampled a token and the one "
                "that trained on it.",
            )
        )
    dropped = _column(steps, "buffer/dropped_stale")
    charts.append(
        lines(
            "staleness-steps",
            "Staleness and groups dropped as stale",
            [
                Series("max group staleness", x, _column(steps, "staleness/group_max")),
                Series(
                    "groups dropped as stale (total)",
                    x,
                    [d if d is not None else 0.0 for d in dropped],
                    axis=1,
                ),
            ],
            ylabel="versions",
            ylabel2="groups",
        )
    )
    for name, title, plotted, ylabel, ylabel2 in STEP_LINES:
        series = [Series(label, x, _column(steps, key), axis=axis) for label, key, axis in plotted]
        charts.append(lines(name, title, series, ylabel=ylabel, ylabel2=ylabel2))
    out.append(_section("Over the steps", charts))
    out.append(_breakdown_section(run))
    return out


def _summary_train(run: Run) -> str:
    rows = []
    if run.evals:
        for e in run.evals:
            rows.append(
                [
                    str(e.get("label", "")),
                    str(e.get("version", "")),
                    _interval(e.get("pass_at_1"), e.get("pass_at_1_low"), e.get("pass_at_1_high")),
                    _fmt(e.get("reward")),
                    str(e.get("graded", "")),
                    str(e.get("system_errors", "")),
                    "yes" if e.get("held_out", True) else "no",
                ]
            )
    table = _table(
        ["evaluation", "step", "Pass@1 [95% interval]", "mean reward", "graded", "system errors",
         "held out"],
        rows,
    )  # fmt: skip
    last = run.steps[-1] if run.steps else {}
    lines_ = [
        f"{len(run.steps)} steps trained",
        f"last step: reward {_fmt(last.get('rollout/reward'))}, "
        f"Pass@1 {_fmt(last.get('rollout/pass_at_1'))}"
        if last
        else "",
        f"groups dropped as stale: {int(last.get('buffer/dropped_stale', 0))}" if last else "",
    ]
    facts = "".join(f"<li>{_e(t)}</li>" for t in lines_ if t)
    body = f"<ul>{facts}</ul>" + (table if rows else "<p class=empty>No evaluation ran.</p>")
    return f"<section><h2>Summary</h2>{body}</section>"


# --- evaluations, pre-evaluations, harness checks -------------------------------------------


def _eval_sections(run: Run) -> list[str]:
    main = run.trial_sets[0] if run.trial_sets else None
    report = run.eval_report or (main.report if main else None)
    out = []
    if report is not None:
        o = report.overall
        rows = [
            ["attempts", str(o.attempts)],
            ["tasks", str(o.tasks)],
            ["graded", str(o.graded)],
            ["Pass@1 [95% interval]", _interval(o.pass_at_1.rate, o.pass_at_1.low,
                                                o.pass_at_1.high)],
            ["mean reward [95% interval]", _interval(o.mean_reward.mean, o.mean_reward.low,
                                                     o.mean_reward.high)],
            ["excluded (system errors)", str(o.excluded)],
        ]  # fmt: skip
        if main and main.sampled_tokens and main.seconds:
            rows.append(["sampled tokens per trial (mean)",
                         f"{sum(main.sampled_tokens) / len(main.sampled_tokens):.0f}"])  # fmt: skip
        if run.preeval is not None:
            gate = run.preeval.get("max_system_error_rate")
            verdict = "passed" if run.preeval.get("passed") else "failed"
            rows.append(
                ["system-error gate", f"{verdict}: {run.preeval.get('system_error_rate', 0):.2%}"
                 + (f" (gate {gate:.2%})" if isinstance(gate, float) else "")]
            )  # fmt: skip
        out.append(
            "<section><h2>Summary</h2>"
            + _table(["", "value"], rows)
            + "<p class=note>Intervals: percentile bootstrap over tasks.</p></section>"
        )
    charts: list[Chart | None] = []
    if report is not None and report.overall.pass_at_k:
        ks = sorted(report.overall.pass_at_k, key=int)
        est = [report.overall.pass_at_k[k] for k in ks]
        charts.append(
            lines(
                "pass-at-k",
                "pass@k",
                [
                    Series(
                        "pass@k",
                        [int(k) for k in ks],
                        [e.mean for e in est],
                        [e.low for e in est],
                        [e.high for e in est],
                    )
                ],
                xlabel="k",
                ylim=(-0.02, 1.02),
            )
        )
    if charts:
        out.append(_section("Attempts", charts))
    out.append(_breakdown_section(run))
    return out


# --- shared ----------------------------------------------------------------------------------


def _reports(run: Run) -> list[tuple[str, EvalReport]]:
    """The reports whose domains and templates are drawn side by side."""
    found: list[tuple[str, EvalReport]] = []
    for s in run.trial_sets:
        if s.key == "trials/eval":
            continue  # mixes every evaluation of the run: each has its own report below
        if s.report is not None:
            found.append((s.label, s.report))
    if run.kind == "train":
        picked = run.evals[:1] + run.evals[1:][-1:]
        for e in picked:
            if "report" in e:
                which = "held-out" if e.get("held_out", True) else "evaluation"
                name = f"{which} at step {e.get('version', '?')}"
                found.append((name, EvalReport.model_validate(e["report"])))
    elif run.eval_report is not None:
        found = [(run.kind if run.kind != "eval" else "evaluation", run.eval_report)]
    return found


def _group_series(
    reports: Sequence[tuple[str, EvalReport]], attribute: str
) -> tuple[list[str], list[Series]]:
    names: list[str] = sorted(
        {name for _, report in reports for name in getattr(report, attribute)}
    )
    series = []
    for label, report in reports:
        groups: dict[str, GroupReport] = getattr(report, attribute)
        found = [groups.get(n) for n in names]
        series.append(
            Series(
                label,
                list(range(len(names))),
                [g.pass_at_1.rate if g else None for g in found],
                [g.pass_at_1.low if g else None for g in found],
                [g.pass_at_1.high if g else None for g in found],
            )
        )
    return names, series


def _breakdown_section(run: Run) -> str:
    reports = _reports(run)
    charts: list[Chart | None] = []
    note = "Whiskers: 95% intervals that resample tasks."
    for attribute, title in (
        ("domains", "Pass@1 per domain"),
        ("templates", "Pass@1 per template"),
    ):
        names, series = _group_series(reports, attribute)
        charts.append(
            bars(
                attribute,
                title,
                names,
                series,
                ylabel="Pass@1",
                horizontal=attribute == "templates",
                ylim=(0, 1.05),
                note=note,
            )
        )
    rows = []
    for label, report in reports:
        for name, group in sorted(report.templates.items()):
            rows.append(
                [
                    label,
                    name,
                    str(group.tasks),
                    str(group.graded),
                    _interval(group.pass_at_1.rate, group.pass_at_1.low, group.pass_at_1.high),
                    _interval(group.mean_reward.mean, group.mean_reward.low,
                              group.mean_reward.high),
                    str(group.excluded),
                ]
            )  # fmt: skip
    table = _table(
        ["trials", "template", "tasks", "graded", "Pass@1 [95%]", "mean reward [95%]",
         "system errors"],
        rows,
    )  # fmt: skip
    return _section("Domains and templates", charts, table if rows else "")


def _taxonomy_categories(found: dict[str, Any]) -> dict[str, int]:
    counts = {"completed": int(found["completed"]["count"])}
    for kind, n in found.get("model_failures", {}).items():
        counts[f"model failure: {kind}"] = int(n)
    for kind, entry in found.get("system_errors", {}).items():
        counts[f"system error: {kind}"] = int(entry["count"])
    return counts


def _outcomes_section(run: Run) -> str:
    sets = run.trial_sets
    charts: list[Chart | None] = []
    if sets:
        per_set = [(s.label, _taxonomy_categories(s.taxonomy)) for s in sets]
        names = list(dict.fromkeys(n for _, counts in per_set for n in counts))
        charts.append(
            bars(
                "taxonomy",
                "Error taxonomy",
                names,
                [
                    Series(label, [], [float(c[n]) if n in c else None for n in names])
                    for label, c in per_set
                ],
                ylabel="trials",
                horizontal=True,
                note="Model failures are the agent's (graded 0); system errors are the "
                "machinery's (masked, never a reward).",
            )
        )
        reasons = sorted({r for s in sets for r in s.stop_reasons})
        charts.append(
            bars(
                "stop-reasons",
                "Stop reasons",
                reasons,
                [
                    Series(
                        s.label,
                        [],
                        [
                            float(s.stop_reasons[r]) if r in s.stop_reasons else None
                            for r in reasons
                        ],
                    )
                    for s in sets
                ],
                ylabel="trajectories",
            )
        )
        main = _main_set(sets)
        charts.append(histogram("turns", f"Turns per trajectory ({main.label})", main.turns,
                                xlabel="turns"))  # fmt: skip
        charts.append(
            histogram(
                "tokens",
                f"Sampled tokens per trajectory ({main.label})",
                main.sampled_tokens,
                xlabel="tokens",
            )
        )
    rows = []
    for s in sets:
        t = s.taxonomy
        rows.append(
            [
                s.label,
                str(t["trials"]),
                str(t["completed"]["count"]),
                _fmt(t["completed"]["mean_reward"]),
                str(sum(t["model_failures"].values())),
                str(sum(e["count"] for e in t["system_errors"].values())),
                f"{t['system_error_rate']:.2%}",
                str(sum(t["retried"].values())),
                str(len(t["task_defects"])),
            ]
        )
    table = _table(
        ["trials", "count", "completed", "mean reward", "model failures", "system errors",
         "system-error rate", "retried", "task defects"],
        rows,
    )  # fmt: skip
    examples = []
    for s in sets:
        for kind, entry in s.taxonomy["system_errors"].items():
            folders = ", ".join(_e(str(s.folder / name)) for name in entry["examples"])
            examples.append(f"<li>{_e(s.label)}: <b>{_e(kind)}</b> ({entry['count']}): "
                            f"{folders}</li>")  # fmt: skip
    extra = table if rows else "<p class=empty>No trials in this run folder.</p>"
    if examples:
        extra += "<p>Example trial folders of each system error:</p><ul>" + "".join(examples)
        extra += "</ul>"
    return _section("Outcomes", charts, extra)


def _main_set(sets: Sequence[TrialSet]) -> TrialSet:
    return max(sets, key=lambda s: len(s.rows))


def _config_section(run: Run) -> str:
    if not run.config_text:
        return "<section><h2>Resolved config</h2><p class=empty>No config.resolved.toml.</p>"
    return (
        "<section><h2>Resolved config</h2><details open><summary>config.resolved.toml"
        f"</summary><pre>{_e(run.config_text)}</pre></details></section>"
    )


def _section(title: str, charts: Iterable[Chart | None], extra: str = "") -> str:
    figures = []
    for chart in charts:
        if chart is None:
            continue
        note = f"<p class=note>{_e(chart.note)}</p>" if chart.note else ""
        figures.append(
            f'<figure class="chart" data-points="{chart.points}"><figcaption>'
            f"{_e(chart.title)}</figcaption>{chart.svg}{note}</figure>"
        )
    grid = f"<div class=grid>{''.join(figures)}</div>" if figures else ""
    return f"<section><h2>{_e(title)}</h2>{grid}{extra}</section>"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class=sortable><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _rate_bound(group: GroupReport | None, which: str) -> float | None:
    if group is None or group.pass_at_1.rate is None:
        return None
    return float(getattr(group.pass_at_1, which))


def _mean_bound(group: GroupReport | None, which: str) -> float | None:
    if group is None:
        return None
    value = getattr(group.mean_reward, which)
    return None if value is None else float(value)


def _fmt(value: Any) -> str:
    if isinstance(value, int | float) and math.isfinite(value):
        return f"{value:.3f}"
    return "–"


def _interval(value: Any, low: Any, high: Any) -> str:
    if not isinstance(value, int | float):
        return "–"
    return f"{_fmt(value)} [{_fmt(low)}, {_fmt(high)}]"


def _e(text: str) -> str:
    return html.escape(text, quote=True)
