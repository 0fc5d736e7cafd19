"""The tables of the Est evidence runs (docs/benchmarks.md, "Reinforce-Ada-Est against GRPO-n8"), from the committed
``compare`` reports ``benchmarks/results/compare_est_<bed>.json`` (against grpo-n8) and
``compare_est_<bed>_vs_grpo.json`` (the same runs against grpo):

    python benchmarks/est_summary.py recurring filtered filtered-low addition mixed            # accuracy, per bed
    python benchmarks/est_summary.py --table cost recurring filtered filtered-low addition mixed   # cost, entropy
    python benchmarks/est_summary.py --table forty recurring-40      # the 40-seed bed: every interval it reports

A report written by an earlier version is recomputed from the per-seed values it carries (each run's held-out
history and further evaluations) by the package's current ``compare`` statistics
(:func:`reinforce_ada.research.compare.report.analyse`, with the exact Student-t quantile), so every report is
summarised by today's rules: a cell
is a paired difference by seed, mean ± 95% t-interval half-width, each strategy at its own best lr. ``--reports N8
N4`` reads the two report.json files of a comparison folder instead (e.g. an unfinished run's, viewed elsewhere).

``forty`` is the declared 40-seed recurring bed (benchmarks/est_compare.sh recurring-40): Est against GRPO-n8 (the
report against grpo-n8) and Est-n4 against GRPO-n4 (the report against grpo), at the baseline's tokens, at equal
steps and at its seconds, per difficulty stratum, pass@k and entropy, the cost ratios, and the paper's Table 5 claim
-- Est's gain larger on hard prompts than on easy ones -- as a paired interval on gain(hard + extremely hard) minus
gain(easy), per seed, at the baseline's tokens (a stratum pair's accuracy is the prompt-weighted mean of its strata's).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from reinforce_ada.research.compare.breakdown import value_at
from reinforce_ada.research.compare.report import REPORT_FORMAT, analyse
from reinforce_ada.research.compare.stats import t_interval
from reinforce_ada.research.compare.verdict import call, interval_words

RESULTS = Path(__file__).resolve().parent / "results"
TOKENS = 1  # the history column of generated tokens
HARD = ("extremely_hard", "hard")
EASY = ("easy",)


def reanalyse(report: dict) -> dict:
    """A report written before today's statistics (format < 3) recomputed from its own runs by today's ``analyse``
    (the runs' timings are not in report.json, so the seconds-per-step split is not recomputed: nothing here reads
    it); a current one as it is."""
    if report["format"] >= REPORT_FORMAT:
        return report
    runs = {(r["strategy"], r["lr"], r["seed"]): {"history": r["history"], "evals": r["evals"], "strata": r["strata"],
                                                  "dynamics": r["dynamics"], "timing": {}, "zero_variance": None}
            for r in report["runs"]}
    strategies = list(report["strategies"])
    return analyse(runs, strategies, report["lrs"], report["baseline"], report["best_lr_rule"])


def load(bed: str) -> tuple[dict, dict]:
    """The bed's two reports (against grpo-n8, against grpo), re-analysed."""
    return tuple(reanalyse(json.loads((RESULTS / f"compare_est_{bed}{tail}.json").read_text()))
                 for tail in ("", "_vs_grpo"))


def _number(value) -> float:
    return math.nan if value is None else float(value)


def ci(pair) -> str:
    """``mean ± half-width``; the mean alone without an interval (one seed), ``-`` without a mean."""
    mean, half = map(_number, pair)
    if math.isnan(mean):
        return "-"
    return f"{mean:+.3f}" if math.isnan(half) else f"{mean:+.3f} ± {half:.3f}"


def ratio(r: dict) -> str:
    """``geomean [low, high]`` (the point alone without an interval)."""
    geomean, low, high = (_number(r[k]) for k in ("geomean", "low", "high"))
    if math.isnan(geomean):
        return "-"
    return f"{geomean:.2f}" if math.isnan(low) else f"{geomean:.2f} [{low:.2f}, {high:.2f}]"


def accuracy_row(bed: str, vs_n8: dict, vs_n4: dict) -> str:
    n8, est, seq = (vs_n8["strategies"][name] for name in ("grpo-n8", "ada-est", "ada-balanced"))
    base = n8["per_lr"][repr(n8["best_lr"])]
    final = sum(base["final"]) / len(base["final"])
    lrs = ", ".join(f"{name} {vs_n8['strategies'][name]['best_lr']:g}"
                    + ("*" if vs_n8["strategies"][name]["best_lr_at_edge"] else "")
                    for name in ("grpo", "grpo-n8", "ada-est", "ada-balanced"))
    needed = est["verdict"]["at_tokens"]["seeds_needed"]
    return (f"| {bed} | {final:.3f} | **{ci(est['paired_mean_ci95']['at_tokens'])}** | "
            f"{needed if needed is not None else '-'} | {ci(est['paired_mean_ci95']['at_steps'])} | "
            f"{ci(est['paired_mean_ci95']['at_seconds'])} | {ci(seq['paired_mean_ci95']['at_tokens'])} | "
            f"{ci(vs_n4['strategies']['ada-est']['paired_mean_ci95']['at_tokens'])} | "
            f"{ci(vs_n4['strategies']['grpo-n8']['paired_mean_ci95']['at_tokens'])} | {lrs} |")


def accuracy_table(beds: list[str]) -> list[str]:
    lines = ["| bed | grpo-n8 final | ada-est vs grpo-n8 at its tokens | seeds that would resolve it | at equal steps "
             "| at its seconds | ada-balanced vs grpo-n8 at its tokens | ada-est vs grpo at grpo's tokens | grpo-n8 vs "
             "grpo at grpo's tokens | best lr (* grid's edge) |", "|---|---|---|---|---|---|---|---|---|---|"]
    return lines + [accuracy_row(bed, *load(bed)) for bed in beds]


def cost_table(beds: list[str]) -> list[str]:
    lines = ["| bed | ada-est tokens x grpo-n8's | ada-est seconds x grpo-n8's | ada-est entropy vs grpo-n8 at its "
             "tokens (nats) | at equal steps |", "|---|---|---|---|---|"]
    for bed in beds:
        est = load(bed)[0]["strategies"]["ada-est"]
        entropy = est["breakdown"]["entropy"]["paired"]["ci95"]
        lines.append(f"| {bed} | {ratio(est['cost_ratios']['tokens'])} | {ratio(est['cost_ratios']['seconds'])} | "
                     f"{ci(entropy['at_tokens'])} | {ci(entropy['at_steps'])} |")
    return lines


def stratum_pair(run: dict, names: tuple[str, ...], budget: float) -> float:
    """A run's accuracy on the prompts of ``names`` at ``budget`` tokens: its strata's accuracies weighted by their
    prompts (nan when it has none of them)."""
    total = weight = 0.0
    for name in names:
        values, counts = run["evals"].get(f"eval/accuracy/{name}"), run["evals"].get(f"eval/num_prompts/{name}")
        if not values or not counts:
            continue
        count = next((c for c in counts if c is not None), 0)
        accuracy = value_at(run["history"], values, TOKENS, budget)
        if count and not math.isnan(accuracy):
            total, weight = total + count * accuracy, weight + count
    return total / weight if weight else math.nan


def hard_minus_easy(report: dict, strategy: str) -> dict:
    """Per seed, at the baseline's tokens: (the strategy's gain over the baseline on hard + extremely hard prompts)
    minus (its gain on easy ones), with the verdict of that difference; and each gain's own interval."""
    base, budget = report["baseline"], report["budgets"]["tokens"]
    entry = report["strategies"][strategy]
    runs = {(r["strategy"], r["seed"]): r for r in report["runs"]
            if r["lr"] == report["strategies"][r["strategy"]]["best_lr"]}
    hard, easy, gap = [], [], []
    for seed in entry["paired"]["seeds"]:
        mine, theirs = runs[(strategy, seed)], runs[(base, seed)]
        if mine["strata"] is None or theirs["strata"] is None or mine["strata"]["digest"] != theirs["strata"]["digest"]:
            continue
        g_hard = stratum_pair(mine, HARD, budget) - stratum_pair(theirs, HARD, budget)
        g_easy = stratum_pair(mine, EASY, budget) - stratum_pair(theirs, EASY, budget)
        if math.isnan(g_hard) or math.isnan(g_easy):
            continue
        hard.append(g_hard)
        easy.append(g_easy)
        gap.append(g_hard - g_easy)
    return {"seeds": len(gap), "hard": t_interval(hard), "easy": t_interval(easy), "gap": call(gap)}


def forty_table(vs_n8: dict, vs_n4: dict) -> list[str]:
    """The 40-seed bed: Est vs GRPO-n8 (report against grpo-n8) and Est-n4 vs GRPO-n4 (report against grpo)."""
    pairs = [("ada-est vs grpo-n8", vs_n8, "ada-est"), ("ada-est-n4 vs grpo", vs_n4, "ada-est-n4"),
             ("ada-est vs grpo", vs_n4, "ada-est"), ("grpo-n8 vs grpo", vs_n4, "grpo-n8")]
    pairs = [(label, report, name) for label, report, name in pairs if name in report["strategies"]]
    strata = ("extremely_hard", "hard", "medium", "easy")
    lines = ["| comparison (paired by seed) | seeds | at the baseline's tokens | seeds that would resolve it | at equal "
             "steps | at its seconds | " + " | ".join(f"{s} at its tokens" for s in strata)
             + " | pass@1 / pass@2 / pass@4 at its tokens | entropy at its tokens (nats) | tokens x | seconds x |",
             "|---|---|---|---|---|---|" + "---|" * len(strata) + "---|---|---|---|"]
    for label, report, name in pairs:
        entry = report["strategies"][name]
        paired = entry["paired_mean_ci95"]
        by_stratum = (entry["breakdown"]["strata"] or {}).get("by_stratum", {})
        stratum_cells = [ci(by_stratum[s]["paired"]["ci95"]["at_tokens"]) if s in by_stratum else "-" for s in strata]
        passes = entry["breakdown"]["pass_at_k"]
        pass_cells = " / ".join(ci(passes[k]["paired"]["ci95"]["at_tokens"]) for k in sorted(passes, key=int))
        entropy = entry["breakdown"]["entropy"]
        entropy_cell = ci(entropy["paired"]["ci95"]["at_tokens"]) if entropy else "-"
        verdict = entry["verdict"]["at_tokens"]
        needed = "resolved" if verdict["call"] != "inconclusive" else (verdict["seeds_needed"] or "-")
        lines.append(f"| {label} | {len(entry['paired']['seeds'])} | **{ci(paired['at_tokens'])}** | {needed} | "
                     f"{ci(paired['at_steps'])} | {ci(paired['at_seconds'])} | " + " | ".join(stratum_cells)
                     + f" | {pass_cells} | {entropy_cell} | {ratio(entry['cost_ratios']['tokens'])} | "
                       f"{ratio(entry['cost_ratios']['seconds'])} |")
    lines += ["", "The paper's Table 5 claim, at the baseline's tokens: the gain on hard + extremely hard prompts "
                  "minus the gain on easy ones, per seed (prompt-weighted accuracy over a stratum pair).", "",
              "| comparison | seeds | gain on hard + extremely hard | gain on easy | hard minus easy | verdict |",
              "|---|---|---|---|---|---|"]
    for label, report, name in pairs[:2]:
        result = hard_minus_easy(report, name)
        gap = result["gap"]
        words = "no resolved difference" if gap["call"] == "inconclusive" else \
            ("larger on hard prompts" if gap["call"] == "ahead" else "larger on easy prompts")
        interval = ci((gap["mean"], gap["half_width"]))
        if gap["half_width"] is not None:
            interval += f" ({interval_words(gap['mean'], gap['half_width'])})"
        lines.append(f"| {label} | {result['seeds']} | {ci(result['hard'])} | {ci(result['easy'])} | {interval} | "
                     f"{words} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("beds", nargs="*", help="recurring, filtered, filtered-low, addition, mixed (forty: "
                                                "recurring-40)")
    parser.add_argument("--table", choices=("accuracy", "cost", "forty"), default="accuracy")
    parser.add_argument("--reports", nargs=2, metavar=("VS_GRPO_N8", "VS_GRPO"), type=Path,
                        help="with --table forty: the two report.json files to read instead of the committed ones")
    args = parser.parse_args(argv)
    if args.table == "forty":
        if args.reports:
            reports = [reanalyse(json.loads(path.read_text())) for path in args.reports]
        elif len(args.beds) == 1:
            reports = load(args.beds[0])
        else:
            parser.error("--table forty takes one bed (recurring-40) or --reports VS_GRPO_N8 VS_GRPO")
        lines = forty_table(*reports)
    elif not args.beds:
        parser.error("name the beds")
    else:
        lines = (accuracy_table if args.table == "accuracy" else cost_table)(args.beds)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
