"""Run TRL's own ``tests/test_grpo_trainer.py`` offline against ``GRPOTrainer`` and against ``AdaGRPOTrainer``.

Not a test module (pytest does not collect it); a tool behind the "TRL's own tests" table in docs/trl.md::

    git clone https://github.com/huggingface/trl /tmp/trl     # any checkout; its tests/ folder is used in place
    python tests/integrations/trl_upstream.py /tmp/trl/tests --json /tmp/trl_upstream.json [-k EXPR]

It runs the test file twice with this module as a pytest plugin (``-p trl_upstream``):

* ``grpo``: TRL's ``GRPOTrainer`` as is (training capped at ``MAX_STEPS`` steps in both modes, for time);
* ``ada``: ``trl.GRPOTrainer`` / ``trl.GRPOConfig`` replaced by ``AdaGRPOTrainer`` / ``AdaGRPOConfig`` in a
  GRPO-equivalent configuration (``max_rounds=1``, ``samples_per_round=num_generations``; with several reward
  functions ``correctness_reward_funcs=[0]``, which AdaGRPOConfig requires and which cannot change a one-round run).

Nothing is downloaded: the hub ids the tests use most (``trl-internal-testing/tiny-Qwen2ForCausalLM-2.5`` and
``tiny-Qwen2ForSequenceClassification-2.5``) are written into a temporary hub cache as locally built tiny Qwen2 models
with a character tokenizer and a minimal chat template, and ``datasets.load_dataset("trl-internal-testing/zen", ...)``
returns a local stand-in (the Zen of Python, as plain and as chat prompts). Tests that need other models, images,
GPUs or vLLM fail or skip the same way in both runs; the table lists the tests that pass with ``GRPOTrainer`` and not
with ``AdaGRPOTrainer``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

MODE_ENV = "TRL_UPSTREAM_TRAINER"
MAX_STEPS = 2
CAUSAL_LM = "trl-internal-testing/tiny-Qwen2ForCausalLM-2.5"
REWARD_MODEL = "trl-internal-testing/tiny-Qwen2ForSequenceClassification-2.5"
CHAT_TEMPLATE = ("{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


# -- the stand-ins for the hub ------------------------------------------------------------------------------------------
def write_hub_cache(cache: Path) -> None:
    """Save the two tiny Qwen2 models under their hub ids into an offline hub cache at ``cache``."""
    from transformers import Qwen2ForSequenceClassification

    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    causal = build_tiny_model(max_positions=512)
    reward = Qwen2ForSequenceClassification(causal.config.__class__(**{**causal.config.to_dict(), "num_labels": 1}))
    for repo_id, model in ((CAUSAL_LM, causal), (REWARD_MODEL, reward)):
        folder = cache / f"models--{repo_id.replace('/', '--')}"
        snapshot = folder / "snapshots" / ("0" * 40)
        model.save_pretrained(snapshot)
        tokenizer.save_pretrained(snapshot)
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / "main").write_text("0" * 40)


def zen_dataset(name: str, config: str | None = None, split: str | None = None, streaming: bool = False, **kwargs):
    """``load_dataset("trl-internal-testing/zen", config)`` without the hub: the Zen of Python as prompts."""
    import codecs
    import this  # noqa: F401 -- prints the Zen once; its text is this.s (rot13)

    from datasets import Dataset, DatasetDict

    if name != "trl-internal-testing/zen" or config not in ("standard_prompt_only", "conversational_prompt_only"):
        raise FileNotFoundError(f"trl_upstream has no offline copy of dataset {name!r} ({config!r})")
    lines = [line for line in codecs.decode(this.s, "rot13").splitlines()[2:] if line.strip()]
    prompts = [" ".join(line.split()[:4]) for line in lines]

    def build(rows: list[str]) -> Dataset:
        if config == "conversational_prompt_only":
            return Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in rows]})
        return Dataset.from_dict({"prompt": rows})

    splits = {"train": build(prompts[:17]), "test": build(prompts[17:])}
    data = splits[split] if split else DatasetDict(splits)
    if streaming:
        data = data.to_iterable_dataset() if split else {k: v.to_iterable_dataset() for k, v in data.items()}
    return data


# -- the pytest plugin (``-p trl_upstream``) ---------------------------------------------------------------------------
def pytest_configure(config) -> None:  # noqa: ANN001
    import importlib
    import importlib.util

    import datasets

    import_utils = importlib.import_module("trl.import_utils")
    datasets.load_dataset = zen_dataset  # before the test module imports it
    # The checkout's testing_utils may import availability checks this TRL version does not define.
    for package in ("joblib", "harbor", "openreward", "jmespath", "mergekit", "math_verify", "liger_kernel", "vllm"):
        name = f"is_{package}_available"
        if name not in vars(import_utils):
            setattr(import_utils, name, lambda package=package: importlib.util.find_spec(package) is not None)
    _install_trainer(os.environ.get(MODE_ENV, "grpo"))


def _install_trainer(mode: str) -> None:
    """Replace ``trl.GRPOConfig`` (and in "ada" mode ``trl.GRPOTrainer``) before the test module imports them.

    Both modes cap training at ``MAX_STEPS`` optimizer steps when a test leaves ``max_steps`` at its default (-1), so
    that the file runs in minutes on a CPU; the comparison between the modes is unaffected.
    """
    import trl

    if mode == "ada":
        from reinforce_ada.integrations.trl import AdaGRPOConfig as base_config
        from reinforce_ada.integrations.trl import AdaGRPOTrainer as base_trainer
    else:
        base_config, base_trainer = trl.GRPOConfig, trl.GRPOTrainer

    class GRPOEquivalentConfig(base_config):
        """In "ada" mode: sample like GRPO (one round of num_generations, keep them all)."""

        def __post_init__(self) -> None:
            if self.max_steps == -1:
                self.max_steps = MAX_STEPS
            if mode == "ada":
                self.max_rounds = 1
                self.samples_per_round = self.num_generations or 8
            super().__post_init__()

    class GRPOEquivalentTrainer(base_trainer):
        def __init__(self, *args, **kwargs):
            funcs = kwargs.get("reward_funcs", args[1] if len(args) > 1 else None)
            config = kwargs.get("args", args[2] if len(args) > 2 else None)
            if mode == "ada" and isinstance(funcs, list) and len(funcs) > 1 \
                    and getattr(config, "correctness_reward_funcs", 0) is None:
                config.correctness_reward_funcs = [0]
            super().__init__(*args, **kwargs)

    for cls in (GRPOEquivalentConfig, GRPOEquivalentTrainer):  # picklable (TRL saves the config in checkpoints)
        cls.__qualname__ = cls.__name__
        globals()[cls.__name__] = cls
    trl.GRPOConfig, trl.GRPOTrainer = GRPOEquivalentConfig, GRPOEquivalentTrainer


# -- the runner ---------------------------------------------------------------------------------------------------------
def run(tests_dir: Path, mode: str, keyword: str | None, work: Path) -> dict[str, str]:
    """Run TRL's GRPO tests with ``mode`` ("grpo" or "ada"); return {test id: passed/failed/skipped/error}."""
    report = work / f"{mode}.xml"
    env = dict(os.environ, **{MODE_ENV: mode}, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", HF_HUB_CACHE=str(work / "hub"), TRL_EXPERIMENTAL_SILENCE="1",
               CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join(
                   [str(Path(__file__).parent), str(Path(__file__).resolve().parents[2]),
                    os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "pytest", str(tests_dir / "test_grpo_trainer.py"), "-p", "trl_upstream",
           "-p", "no:cacheprovider", "-q", "--junitxml", str(report),
           "-o", "addopts=", "--rootdir", str(tests_dir.parent)]
    if keyword:
        cmd += ["-k", keyword]
    subprocess.run(cmd, env=env, cwd=tests_dir.parent, check=False)
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed: " + (child.get("message") or "").splitlines()[0][:200] if child.get("message") \
                    else "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        outcomes[name] = outcome
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests_dir", type=Path, help="TRL's tests/ folder (holding test_grpo_trainer.py)")
    parser.add_argument("--json", type=Path, help="write {mode: {test: outcome}} here")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--modes", default="grpo,ada")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_hub_cache(work / "hub")
        results = {mode: run(args.tests_dir.resolve(), mode, args.keyword, work) for mode in args.modes.split(",")}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if {"grpo", "ada"} <= results.keys():
        grpo, ada = results["grpo"], results["ada"]
        passing = [t for t, o in grpo.items() if o == "passed"]
        differ = [t for t in passing if ada.get(t) != "passed"]
        print(f"\n{len(grpo)} tests; {len(passing)} pass offline with GRPOTrainer; "
              f"{len(passing) - len(differ)} of those pass with AdaGRPOTrainer; {len(differ)} do not:")
        for test in differ:
            print(f"  {test}: {ada.get(test)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
