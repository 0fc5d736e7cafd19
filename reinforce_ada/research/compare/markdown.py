"""``report.md``: the report of ``reinforce-ada compare`` (:func:`~reinforce_ada.research.compare.report.analyse`'s
dict) in words and tables, the verdict first.

1. **Verdict**: which held-out prompts chose the lrs and which judged (a winner that changes between them is
   flagged); each strategy at equal tokens, steps and seconds -- *ahead*, *behind* or *no resolved difference*
   with the range of its interval and, when unresolved, the seeds that would resolve it (:mod:`.verdict`, whose rule
   the report states); then where it lands by difficulty stratum (when the runs have strata), pass@k, entropy and its
   cost in tokens and seconds, each with its interval.
2. The runs: budgets, rules, a row per (strategy, lr).
3. Each strategy at its best lr against the baseline: paired differences, steps to the baseline's final accuracy,
   tokens and seconds ratios, seconds per step by part.
4. By difficulty stratum, and pass@k with the held-out entropy, at equal steps and at the baseline's tokens
   (:mod:`.breakdown`).

A cell that holds no number shows ``-`` with a footnote saying why.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from reinforce_ada.research.compare.stats import fmt
from reinforce_ada.research.compare.verdict import MAX_SEEDS, Z80, in_words, interval_words

__all__ = ["format_report"]

_SUPERSCRIPTS = "¹²³⁴⁵⁶⁷⁸⁹"


class Footnotes:
    """Numbered reasons for cells without a number; one number per distinct reason."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def mark(self, reason: str) -> str:
        if reason not in self.reasons:
            self.reasons.append(reason)
        i = self.reasons.index(reason) + 1
        return _SUPERSCRIPTS[i - 1] if i <= len(_SUPERSCRIPTS) else f"[{i}]"

    def dash(self, reason: str) -> str:
        return "-" + self.mark(reason)

    def lines(self) -> list[str]:
        return [f"{self.mark(r)} {r}" for r in self.reasons]


_NO_PAIR = "no seed that both this strategy and the baseline finished"


ZERO_WIDTH = ("every paired seed gave the same difference: an interval of zero width says nothing of the spread, "
              "it needs more seeds")


def _ci(pair: Sequence[float | None], notes: Footnotes) -> str:
    """A paired difference, ``mean ± half-width``; the mean alone, footnoted, where there is no interval (one seed)
    or where it has zero width around a difference (:func:`~.verdict.call` resolves none there; ``+0.000 ± 0.000``,
    no difference observed, stays as it is: the baseline against itself, or seeds that all tie)."""
    mean, half = (math.nan if v is None else v for v in pair)
    if math.isnan(mean):
        return notes.dash(_NO_PAIR)
    if math.isnan(half):
        return f"{mean:+.3f}" + notes.mark("one paired seed: a difference without an interval")
    if half == 0 and mean != 0:
        return f"{mean:+.3f}" + notes.mark(ZERO_WIDTH)
    return f"{mean:+.3f} ± {half:.3f}"


def format_report(report: dict[str, Any], notes: Sequence[str] = ()) -> str:
    """The report as markdown (see the module docstring); ``notes`` are appended (how seconds were measured, runs
    left out)."""
    footnotes = Footnotes()
    base = report["baseline"]
    lines = ["## Verdict", "", *_verdict(report), "", "## The runs", "", *_runs(report), "",
             f"## Each strategy at its best lr against {base}", "", *_paired(report, footnotes), "",
             "## By difficulty stratum", "", *_strata(report, footnotes), "",
             "## pass@k and entropy", "", *_pass_at_k(report, footnotes)]
    if footnotes.reasons:
        lines += ["", *footnotes.lines()]
    return "\n".join(lines + list(notes)) + "\n"


def _verdict(report: dict[str, Any]) -> list[str]:
    base = report["baseline"]
    others = {s: e for s, e in report["strategies"].items() if s != base}
    num = len(report["seeds"])
    lines = [f"Each strategy at its best lr against {base}, paired by seed ({num} seed{'s' * (num != 1)} of {base}): "
             f"*ahead* or *behind* when the 95% t-interval of the paired accuracy differences lies above or below 0, "
             f"*no resolved difference* when it holds 0 (the range in brackets is the interval: a difference inside it "
             f"was not shown, and neither was equality).", ""]
    lines += [_selection_words(report), ""]
    if not others:
        return lines + [f"Only {base} finished: nothing to compare."]
    for strategy, entry in others.items():
        lines.append(in_words(f"{strategy} (lr {entry['best_lr']:g})", entry["verdict"]))
        for extra in (_where(entry, base), _pass_line(entry), _entropy_line(entry), _cost_line(entry, base)):
            if extra:
                lines.append(f"  {extra}")
    lines += ["", f"Seeds needed (the power rule): if the true difference and spread were those observed, a paired "
                  f"t-test at 5% would detect it with 80% power at about the smallest n with "
                  f"(t_0.975,n-1 + {Z80:.4f}) · sd / √n <= |mean difference|; a planning figure from few seeds, "
                  f"growing with (sd / difference)² (past {MAX_SEEDS} seeds it says so)."]
    if any(e["best_lr_at_edge"] for e in report["strategies"].values()):
        edges = ", ".join(f"{s} ({e['best_lr_at_edge']})" for s, e in report["strategies"].items()
                          if e["best_lr_at_edge"])
        lines += ["", f"Learning rates at the edge of the grid: {edges}. A better lr may lie outside it"
                      + (" (a one-lr grid says nothing about the lr)" if len(report["lrs"]) == 1 else "")
                      + ", so each verdict holds for this grid only."]
    return lines


def _selection_words(report: dict[str, Any]) -> str:
    """Which held-out prompts chose the lrs and which judged them, and any winner that differs between the two."""
    selection = report.get("selection") or {"rule": "same", "winner_changed": []}
    if len(report["lrs"]) == 1:
        return "One lr: nothing was chosen, and every held-out prompt judges."
    if selection["rule"] == "same":
        return ("The lrs were chosen on the same held-out prompts and seeds that every number here measures "
                "(`--lr-selection same`): the chosen lr's luck on those prompts is in the report, and where lrs nearly "
                "tie it can move a difference by as much as its size.")
    sizes = selection["num_prompts"]
    text = (f"The lrs were chosen on one half of each seed's held-out prompts ({sizes['selection']:g} per seed, fixed "
            f"by the seed) and every number here is measured on the other half ({sizes['report']:g} per seed), "
            f"`--lr-selection split`; report.json's `selection.prompts` lists each half by prompt content hash.")
    changed = selection["winner_changed"]
    if not changed:
        return text + " On the report half the same rule picks the same lrs."
    entries = report["strategies"]
    return text + " **The winner changes between the halves** for " + ", ".join(
        f"{s} (chosen {entries[s]['best_lr']:g}; the report half would pick "
        f"{entries[s]['best_lr_on_report_prompts']:g})"
        for s in changed if s in entries) + ": the choice is close, and the verdict holds for the lr chosen."


def _where(entry: dict[str, Any], base: str) -> str:
    """Where the difference lands: the strata whose paired difference at the baseline's tokens is resolved."""
    strata = (entry.get("breakdown") or {}).get("strata")
    if not strata:
        return ""
    resolved, open_ = [], []
    for name, cell in strata["by_stratum"].items():
        verdict = cell["paired"]["verdict"]["at_tokens"]
        if verdict["call"] in ("ahead", "behind"):
            resolved.append(f"{verdict['call']} on {name} ({interval_words(verdict['mean'], verdict['half_width'])})")
        else:
            open_.append(name)
    text = "; ".join(resolved) if resolved else "no stratum resolved"
    return (f"By difficulty stratum at {base}'s tokens: {text}"
            + (f"; no resolved difference on {', '.join(open_)}" if resolved and open_ else "") + ".")


def _budget_calls(verdicts: dict[str, Any]) -> str:
    """At equal tokens and at equal steps: each call in words with its interval's range."""
    parts = []
    for axis, words in (("at_tokens", "at equal tokens"), ("at_steps", "at equal steps")):
        v = verdicts[axis]
        if v["mean"] is None:
            parts.append(f"{words} no resolved difference ({v['reason']})")
            continue
        call = "no resolved difference" if v["call"] == "inconclusive" else v["call"]
        zero_width = v["half_width"] == 0 and v["mean"] != 0  # no interval: why, in the brackets
        parts.append(f"{words} {call} ({interval_words(v['mean'], v['half_width'])}"
                     + (f"; {v['reason']})" if zero_width else ")"))
    return "; ".join(parts)


def _pass_line(entry: dict[str, Any]) -> str:
    """The verdict on pass@k at the largest k the runs logged, at equal tokens and at equal steps."""
    cells = (entry.get("breakdown") or {}).get("pass_at_k") or {}
    if not cells:
        return ""
    k = max(cells, key=int)
    return f"pass@{k} (the largest k its evaluations give): " + _budget_calls(cells[k]["paired"]["verdict"]) + "."


def _entropy_line(entry: dict[str, Any]) -> str:
    """The held-out samples' token entropy against the baseline's, paired by seed, with its interval."""
    paired = ((entry.get("breakdown") or {}).get("entropy") or {}).get("paired")
    if not paired:
        return ""
    return "Held-out token entropy (nats): " + _budget_calls(paired["verdict"]) + "."


def _cost_line(entry: dict[str, Any], base: str) -> str:
    """What it cost against the baseline: per-seed ratios of tokens and seconds, geometric mean and 95% interval."""
    ratios = entry.get("cost_ratios")
    if not ratios or ratios["tokens"]["geomean"] is None or math.isnan(ratios["tokens"]["geomean"]):
        return ""
    parts = []
    for axis in ("tokens", "seconds"):
        r = ratios[axis]
        if r["geomean"] is None or math.isnan(r["geomean"]):
            continue
        bounds = "" if r["low"] is None or math.isnan(r["low"]) else f" [{r['low']:.2f}, {r['high']:.2f}]"
        parts.append(f"{r['geomean']:.2f}x{bounds} {base}'s {axis}")
    return ("Cost, per seed against the same seed's run (geometric mean [95% interval]): " + ", ".join(parts)
            + ".")


def _runs(report: dict[str, Any]) -> list[str]:
    b, base = report["budgets"], report["baseline"]
    lines = [f"Baseline {base} at lr {report['strategies'][base]['best_lr']:g}; seeds {report['seeds']}; budgets: "
             f"{b['steps']:g} steps, {b['tokens']:,.0f} generated tokens, {b['seconds']:,.1f} s of steps "
             f"(the baseline's mean totals). Best lr of the others: highest mean "
             + {"final": "final accuracy", "tokens": "accuracy at the baseline's token budget",
                "seconds": "accuracy at the baseline's seconds"}[report["best_lr_rule"]]
             + f" (rule `{report['best_lr_rule']}`); the baseline's: highest mean final accuracy.", ""]
    lines += ["| strategy @ lr | runs | final accuracy | at B tokens | at B seconds | tokens | step seconds |",
              "|---|---|---|---|---|---|---|"]
    for strategy, entry in report["strategies"].items():
        for lr_key, cell in entry["per_lr"].items():
            mark = " *" if float(lr_key) == entry["best_lr"] else ""
            lines.append(f"| {strategy} @ {float(lr_key):g}{mark} | {len(cell['seeds'])} | {fmt(cell['final'])} | "
                         f"{fmt(cell['at_tokens'])} | {fmt(cell['at_seconds'])} | {fmt(cell['tokens'], 0)} | "
                         f"{fmt(cell['seconds'], 1)} |")
    return lines + ["", "(* best lr; mean ± 95% t-interval over seeds)"]


_EDGE = {"lowest": "edge: lowest", "highest": "edge: highest", "only": "edge: the grid's only lr"}


def _paired(report: dict[str, Any], notes: Footnotes) -> list[str]:
    base = report["baseline"]
    lines = [f"| each at its best lr | vs {base} at equal steps | at {base}'s tokens | at {base}'s seconds | "
             f"steps to {base}'s final, x [95%] | tokens x [95%] | seconds x [95%] | s/step: generation / scoring / "
             f"update / sync |", "|---|---|---|---|---|---|---|---|"]
    for strategy, entry in report["strategies"].items():
        ci = entry["paired_mean_ci95"]
        t = entry["seconds_per_step"]
        split = " / ".join(notes.dash(f"its runs' metrics hold no time/{p}_seconds (written by an earlier version)")
                           if t[p] is None or math.isnan(t[p]) else f"{t[p]:.3f}"
                           for p in ("generation", "scoring", "update", "sync"))
        edge = f" ({_EDGE[entry['best_lr_at_edge']]})" if entry["best_lr_at_edge"] else ""
        ratios = [_ratio_cell(entry["cost_ratios"][axis], notes) for axis in ("tokens", "seconds")]
        cis = [_ci(ci[axis], notes) for axis in ("at_steps", "at_tokens", "at_seconds")]
        lines.append(f"| {strategy} @ {entry['best_lr']:g}{edge} | {cis[0]} | {cis[1]} | {cis[2]} | "
                     f"{_steps_cell(entry.get('steps_to_baseline_final'), notes)} | {ratios[0]} | {ratios[1]} "
                     f"| {split} |")
    return lines + ["", "(paired by seed: the strategy's accuracy minus the baseline's, mean ± 95% t-interval; tokens "
                        "and seconds x: per seed the strategy's total over the baseline's, geometric mean [95% "
                        "t-interval of the log ratios]; edge: the best lr is the lowest or highest of the grid, or its "
                        "only lr, so a better one may lie outside it)"]


def _ratio_cell(ratio: dict[str, Any], notes: Footnotes) -> str:
    """A cost ratio: ``geomean [low, high]``, the point alone for one seed, ``-`` with its reason for none."""
    values = {k: math.nan if ratio[k] is None else ratio[k] for k in ("geomean", "low", "high")}
    if math.isnan(values["geomean"]):
        return notes.dash(_NO_PAIR if not ratio["per_seed"] else "a run with no tokens or seconds: no ratio")
    if math.isnan(values["low"]):
        return f"{values['geomean']:.2f}" + notes.mark("one paired seed: a ratio without an interval")
    return f"{values['geomean']:.2f} [{values['low']:.2f}, {values['high']:.2f}]"


def _steps_cell(steps: dict[str, Any] | None, notes: Footnotes) -> str:
    if not steps:
        return notes.dash(_NO_PAIR)
    ratio, low, high = (math.nan if steps[k] is None else steps[k] for k in ("ratio", "ratio_low", "ratio_high"))
    if math.isnan(ratio):
        return notes.dash(steps["reason"])
    if math.isnan(low) and math.isnan(high):  # an interval that would say nothing: too few seeds, zero width
        return f"{ratio:.2f}" + notes.mark(steps["reason"])
    high_text = "inf" + notes.mark(steps["reason"]) if math.isnan(high) or math.isinf(high) else f"{high:.2f}"
    low_text = "-" if math.isnan(low) else f"{low:.2f}"
    return f"{ratio:.2f} [{low_text}, {high_text}]"


def _strata(report: dict[str, Any], notes: Footnotes) -> list[str]:
    base = report["baseline"]
    entries = report["strategies"]
    base_strata = entries[base]["breakdown"]["strata"]
    if base_strata is None:
        return ["No difficulty strata: these runs fixed none (`--eval-strata-samples 0`, or run folders from before "
                "the strata)."]
    lines = [f"Strata fixed before training from {base_strata['num_samples']} samples per held-out prompt under the "
             f"start model (extremely_hard: none correct; hard: pass rate in (0, {base_strata['bounds'][0]:g}]; "
             f"medium: up to {base_strata['bounds'][1]:g}; easy: above); each run's accuracy on a stratum's prompts, "
             f"paired by seed against {base} as above.", "",
             f"| strategy | stratum | prompts per seed | {base} at start | {base} final | final | vs {base} at equal "
             f"steps | at {base}'s tokens |", "|---|---|---|---|---|---|---|---|"]
    for strategy, entry in entries.items():
        strata = entry["breakdown"]["strata"]
        if strata is None:
            lines.append(f"| {strategy} | {notes.dash('its runs have no strata')} | | | | | | |")
            continue
        for name, cell in strata["by_stratum"].items():
            base_cell = base_strata["by_stratum"].get(name, {})
            paired = cell.get("paired")
            diffs = (_ci(paired["ci95"]["at_steps"], notes), _ci(paired["ci95"]["at_tokens"], notes)) if paired \
                else ("(baseline)", "(baseline)")
            lines.append(f"| {strategy} | {name} | {_num(cell['num_prompts'], 1, notes)} | "
                         f"{_num(base_cell.get('baseline_start'), 3, notes)} | {_num(base_cell.get('final'), 3, notes)} "
                         f"| {_num(cell['final'], 3, notes)} | {diffs[0]} | {diffs[1]} |")
        if strata["seeds_with_other_strata"]:
            lines.append(f"| {strategy} | seeds {strata['seeds_with_other_strata']} left out: their strata differ "
                         f"from {base}'s (another start model or held-out set) | | | | | | |")
    return lines


def _num(value: float | None, digits: int, notes: Footnotes) -> str:
    if value is None or math.isnan(value):
        return notes.dash("no prompt of this stratum in these runs")
    return f"{value:.{digits}f}"


def _pass_at_k(report: dict[str, Any], notes: Footnotes) -> list[str]:
    base = report["baseline"]
    entries = report["strategies"]
    ks = list(entries[base]["breakdown"]["pass_at_k"])
    if not ks:
        return ["No pass@k: these runs' evaluations logged none (run folders from before `eval/pass@k`)."]
    lines = [f"pass@k (unbiased estimator) of each run's held-out samples, k up to its `eval_samples`, read at {base}'s "
             f"last step and at its tokens by interpolating between the run's own evaluations (no checkpoint evaluated "
             f"again); mean over seeds, and for the others (in brackets) the paired difference from {base}. Entropy: "
             f"the mean token entropy of the held-out samples, nats (paired the same way).", ""]
    for axis, words in (("at_steps", f"at equal steps ({report['budgets']['steps']:g})"),
                        ("at_tokens", f"at {base}'s tokens ({report['budgets']['tokens']:,.0f})")):
        lines += [f"| {words} | " + " | ".join(f"pass@{k}" for k in ks) + " | entropy |",
                  "|---|" + "---|" * (len(ks) + 1)]
        for strategy, entry in entries.items():
            cells = []
            for k in ks:
                cell = entry["breakdown"]["pass_at_k"].get(k)
                if cell is None or cell[axis] is None:
                    cells.append(notes.dash(f"its runs logged no pass@{k}"))
                    continue
                text = f"{cell[axis]:.3f}"
                if "paired" in cell:
                    text += f" ({_ci(cell['paired']['ci95'][axis], notes)})"
                cells.append(text)
            entropy = entry["breakdown"]["entropy"]
            if entropy is None or entropy[axis] is None:
                cells.append(notes.dash("its runs logged no eval/entropy"))
            else:
                paired = entropy.get("paired")
                cells.append(f"{entropy[axis]:.3f}" + (f" ({_ci(paired['ci95'][axis], notes)})" if paired else ""))
            lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines[:-1]
