"""Supervised warm start of the built-in tiny model, so that RL starts from a policy that is sometimes right.

RL on verifiable rewards needs some correct samples to learn from (a prompt whose completions all fail gives no
signal). The tiny model starts random, so ``reinforce-ada train`` first fits it with teacher forcing on
``prompt -> answer<eos>`` pairs of the task's train split, checking held-out *sampled* accuracy every
``eval_every`` steps, and stops as soon as it reaches ``target_accuracy`` (the demo uses ~25%: clearly better than
chance, far from solved, so RL has room to show). The result is cached by its settings and the model's
shape, so later runs start at once.

Shipped start models. A warm start is not bit-for-bit the same on every machine (different CPUs and BLAS builds
round differently, and a few hundred steps of SGD amplify that), so for the built-in tasks' default settings the
package ships the warm-started weights (:data:`~reinforce_ada.models.tiny.SHIPPED_START_MODELS`,
``reinforce_ada/models/start_models/<task>/``: ``model.safetensors``,
``config.json``, the char tokenizer's files (so a vLLM engine can be built on the folder) and ``warm_start.json`` with
the settings and how they were made, ~0.4 MB each). A run whose :class:`WarmStartSettings` match a shipped model's
(same :meth:`WarmStartSettings.key`) loads it -- the same weights on every machine; other settings use the cache as
before. Regenerate them (on any machine; the result will differ in the last bits from the shipped ones and in its
start accuracy by a few points) with::

    python -m reinforce_ada.training.warm_start --task arithmetic --out reinforce_ada/models/start_models/arithmetic
    python -m reinforce_ada.training.warm_start --task arithmetic-mixed \
        --out reinforce_ada/models/start_models/arithmetic-mixed
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from reinforce_ada.evaluation import sampled_accuracy
from reinforce_ada.models.tiny import (SHIPPED_START_MODELS, TINY_SHAPE, TINY_VOCAB, build_char_tokenizer,
                                       build_tiny_model, save_char_tokenizer)
from reinforce_ada.types import Prompt

logger = logging.getLogger(__name__)

WARM_START_VERSION = 1


@dataclass
class WarmStartSettings:
    task: str
    task_digits: int
    target_accuracy: float
    max_steps: int
    seed: int
    learning_rate: float = 3e-3
    batch_size: int = 64
    eval_every: int = 100
    eval_prompts: int = 128
    max_new_tokens: int = 8

    @classmethod
    def from_config(cls, config: Any) -> "WarmStartSettings":
        """The warm-start settings a :class:`~reinforce_ada.config.TrainConfig` with ``model="tiny"`` implies."""
        return cls(task=str(config.task), task_digits=config.task_digits, target_accuracy=config.sft_target_accuracy,
                   max_steps=config.sft_max_steps, seed=config.sft_seed, max_new_tokens=config.max_new_tokens)

    def key(self) -> str:
        """A short hash of everything that decides the warm-started weights: these settings, the warm-start code's
        version and the built-in model (shape and vocabulary), so a cache made for another model is never loaded."""
        model = {"shape": TINY_SHAPE, "vocab": TINY_VOCAB}
        payload = json.dumps({"version": WARM_START_VERSION, "model": model, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


def supervised_warm_start(model: Any, tokenizer: Any, train: Sequence[Prompt], held_out: Sequence[Prompt],
                          verifier: Any, settings: WarmStartSettings) -> dict[str, float]:
    """Teacher-forced training on ``prompt -> str(answer) + eos`` until held-out sampled accuracy >= target."""
    import torch

    from reinforce_ada.generation.hf import HFGenerator
    from reinforce_ada.generation.prompting import encode_prompt

    rng = random.Random(settings.seed)
    torch.manual_seed(settings.seed)
    generator = HFGenerator(model, tokenizer, max_new_tokens=settings.max_new_tokens, use_chat_template=False,
                            seed=settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    encoded = [(encode_prompt(tokenizer, p, use_chat_template=False),
                tokenizer(str(p.answer), add_special_tokens=False).input_ids + [eos]) for p in train]
    accuracy, step = 0.0, 0
    model.train()
    for step in range(1, settings.max_steps + 1):
        batch = [encoded[rng.randrange(len(encoded))] for _ in range(settings.batch_size)]
        length = max(len(p) + len(a) for p, a in batch)
        input_ids = torch.full((len(batch), length), pad, dtype=torch.long)
        labels = torch.full((len(batch), length), -100, dtype=torch.long)
        attention = torch.zeros((len(batch), length), dtype=torch.long)
        for row, (p, a) in enumerate(batch):
            ids = p + a
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, len(p): len(ids)] = torch.tensor(a)
            attention[row, : len(ids)] = 1
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % settings.eval_every == 0:
            accuracy = sampled_accuracy(generator, verifier, held_out).accuracy
            logger.info("warm start step %d: loss %.3f, held-out sampled accuracy %.1f%%", step, loss.item(),
                        100 * accuracy)
            if accuracy >= settings.target_accuracy:
                break
    model.eval()
    return {"sft_steps": float(step), "sft_accuracy": accuracy}


def shipped_start_model(settings: WarmStartSettings) -> Path | None:
    """The shipped start model made with exactly ``settings`` (compared by :meth:`WarmStartSettings.key`), or None."""
    for info_file in sorted(SHIPPED_START_MODELS.glob("*/warm_start.json")):
        info = json.loads(info_file.read_text())
        if WarmStartSettings(**info["settings"]).key() == settings.key():
            return info_file.parent
    return None


def load_or_warm_start_tiny(settings: WarmStartSettings, train: Sequence[Prompt], held_out: Sequence[Prompt],
                            verifier: Any, cache: Path) -> tuple[Any, Any, dict[str, float]]:
    """The shipped start model for ``settings`` if there is one, else the warm-started tiny model from ``cache`` if
    present, else train it and store it there (atomically)."""
    import os
    import shutil
    import tempfile

    from transformers import AutoModelForCausalLM

    tokenizer = build_char_tokenizer()
    shipped = shipped_start_model(settings)
    if shipped is not None:
        logger.info("loading the shipped start model %s (same weights on every machine)", shipped)
        model = AutoModelForCausalLM.from_pretrained(shipped, use_safetensors=True)
        info = json.loads((shipped / "warm_start.json").read_text())
        return model, tokenizer, {**info, "source": str(shipped)}
    folder = cache / f"tiny-{settings.task}-{settings.key()}"
    if (folder / "warm_start.json").exists():
        logger.info("loading the warm-started tiny model from %s", folder)
        model = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True)
        info = json.loads((folder / "warm_start.json").read_text())
        return model, tokenizer, info
    logger.info("building the tiny model and warm-starting it on %s (target sampled accuracy %.0f%%; cached in %s)",
                settings.task, 100 * settings.target_accuracy, folder)
    model = build_tiny_model(seed=settings.seed)
    info = supervised_warm_start(model, tokenizer, train, held_out, verifier, settings)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".tmp-"))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        save_char_tokenizer(tokenizer, tmp)  # a complete checkpoint folder, e.g. for a vLLM engine
        (tmp / "warm_start.json").write_text(json.dumps({**info, "settings": asdict(settings)}, indent=2))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    model.name_or_path = str(folder)
    return model, tokenizer, info


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate a shipped start model: warm-start the tiny model exactly as ``reinforce-ada train --task TASK``
    would with the default settings and RL seed 0, then write the folder (see the module docstring)."""
    import argparse
    import platform
    import shutil

    import torch
    import transformers

    from reinforce_ada.config import TrainConfig
    from reinforce_ada.data import get_task, list_tasks

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--task", required=True, help=f"a built-in task: {', '.join(list_tasks())}")
    parser.add_argument("--out", required=True, help="folder to write (replaced if it holds a start model)")
    args = parser.parse_args(argv)
    if args.task not in list_tasks():
        parser.error(f"unknown task {args.task!r}; choose one of {', '.join(list_tasks())}")
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not (out / "warm_start.json").exists():
        parser.error(f"{out} exists and is not a start-model folder; not overwriting it")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    config = TrainConfig(task=args.task)
    settings = WarmStartSettings.from_config(config)
    task = get_task(config.task, **config.task_options())
    # The same prompts the trainer's warm start sees with RL seed 0 (train split) and sft_seed (held-out checks).
    train = task.prompts(max(4096, config.batch_size * 4), seed=config.seed, split="train")
    held_out = task.prompts(settings.eval_prompts, seed=settings.seed + 1000, split="test")
    model, tokenizer = build_tiny_model(seed=settings.seed), build_char_tokenizer()
    info = supervised_warm_start(model, tokenizer, train, held_out, task.verifier(), settings)
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out, safe_serialization=True)
    save_char_tokenizer(tokenizer, out)  # a complete checkpoint folder: a vLLM engine can be built on it
    (out / "warm_start.json").write_text(json.dumps({
        **info, "settings": asdict(settings),
        "made_with": f"python -m reinforce_ada.models.warm_start --task {args.task} --out {args.out}",
        "torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
        "machine": platform.machine()}, indent=2))
    logger.info("wrote %s (sft steps %d, held-out sampled accuracy %.1f%%)", out, info["sft_steps"],
                100 * info["sft_accuracy"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
