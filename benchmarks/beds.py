"""Evidence beds for benchmarks/learning.py (``--bed NAME``): a model shape, a built-in task and its warm-started weights.

A bed is what an RL comparison starts from. ``tiny-<task>`` is today's built-in model (hidden 64 x 2 layers, 2 heads of
32) with the package's shipped start model for the task (``reinforce_ada/models/start_models/<task>/``), i.e. exactly
what ``--task <task>`` without ``--bed`` runs. The larger beds use the same architecture (Qwen2, char tokenizer, head
size 32 so vLLM's CPU attention can serve them) warm-started by our own supervised warm start
(:func:`reinforce_ada.training.warm_start.supervised_warm_start`, the demo's settings: target sampled accuracy 25%) and
stored as fp16 safetensors in ``benchmarks/beds/<name>/``; make one with::

    python benchmarks/beds.py --make h128x2-arithmetic

A bed whose weights are not there is refused by ``learning.py --bed`` in one line naming that command.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

BEDS_DIR = Path(__file__).resolve().parent / "beds"


@dataclass(frozen=True)
class Bed:
    name: str
    task: str
    hidden_size: int
    num_layers: int
    num_heads: int
    shipped_with_package: bool = False  # True: the package's start model for the task (the demo's weights)

    @property
    def folder(self) -> Path:
        if self.shipped_with_package:
            from reinforce_ada.models.tiny import SHIPPED_START_MODELS

            return SHIPPED_START_MODELS / self.task
        return BEDS_DIR / self.name

    def has_weights(self) -> bool:
        return (self.folder / "model.safetensors").exists() and (self.folder / "warm_start.json").exists()


def _beds() -> dict[str, Bed]:
    beds = {}
    for task in ("arithmetic", "arithmetic-mixed"):
        beds[f"tiny-{task}"] = Bed(f"tiny-{task}", task, 64, 2, 2, shipped_with_package=True)
        for hidden, layers in ((128, 2), (128, 4)):
            name = f"h{hidden}x{layers}-{task}"
            beds[name] = Bed(name, task, hidden, layers, hidden // 32)
    return beds


BEDS: dict[str, Bed] = _beds()


def load_bed_model(bed: Bed):
    """``(model, tokenizer)``: the bed's warm-started weights in float32 and the char tokenizer (a fresh copy per call,
    so every run starts from the same weights)."""
    from transformers import AutoModelForCausalLM

    from reinforce_ada.models.tiny import build_char_tokenizer

    model = AutoModelForCausalLM.from_pretrained(bed.folder, use_safetensors=True).float()
    model.eval()
    return model, build_char_tokenizer()


def make_bed(bed: Bed, out: Path | None = None, max_steps: int | None = None) -> dict:
    """Warm-start the bed's model on its task with the demo's warm-start settings (``max_steps`` overrides the cap, for
    tests) and write it, fp16, to ``out`` (default: the bed's folder). Returns the warm start's info."""
    import torch
    import transformers

    from reinforce_ada.config import TrainConfig
    from reinforce_ada.data import get_task
    from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model, save_char_tokenizer
    from reinforce_ada.training.warm_start import WarmStartSettings, supervised_warm_start

    if bed.shipped_with_package:
        raise ValueError(f"bed {bed.name} is the package's start model; regenerate it with "
                         f"python -m reinforce_ada.training.warm_start --task {bed.task}")
    torch.set_num_threads(1)
    config = TrainConfig(task=bed.task)
    settings = WarmStartSettings.from_config(config)
    if max_steps is not None:
        settings.max_steps = max_steps
        settings.eval_every = min(settings.eval_every, max_steps)
    task = get_task(config.task, **config.task_options())
    # The prompts the trainer's own warm start sees with RL seed 0 (train split) and sft_seed (held-out checks).
    train = task.prompts(max(4096, config.batch_size * 4), seed=config.seed, split="train")
    held_out = task.prompts(settings.eval_prompts, seed=settings.seed + 1000, split="test")
    model = build_tiny_model(hidden_size=bed.hidden_size, num_layers=bed.num_layers, num_heads=bed.num_heads,
                             seed=settings.seed)
    tokenizer = build_char_tokenizer()
    info = supervised_warm_start(model, tokenizer, train, held_out, task.verifier(), settings)
    out = Path(out or bed.folder)
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(out, safe_serialization=True)
    save_char_tokenizer(tokenizer, out)
    info = {**info, "bed": asdict(bed), "settings": asdict(settings),
            "parameters": sum(p.numel() for p in model.parameters()),
            "made_with": f"python benchmarks/beds.py --make {bed.name}", "torch": torch.__version__,
            "transformers": transformers.__version__, "python": platform.python_version(),
            "machine": platform.machine()}
    (out / "warm_start.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--make", required=True, metavar="NAME", help=f"one of {', '.join(BEDS)}")
    parser.add_argument("--out", default=None, help="folder to write (default: benchmarks/beds/NAME)")
    args = parser.parse_args(argv)
    if args.make not in BEDS:
        parser.error(f"unknown bed {args.make!r}; choose from {', '.join(BEDS)}")
    if BEDS[args.make].shipped_with_package:
        parser.error(f"bed {args.make} is the package's start model for {BEDS[args.make].task}; regenerate it with "
                     f"python -m reinforce_ada.training.warm_start")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    info = make_bed(BEDS[args.make], Path(args.out) if args.out else None)
    print(f"wrote {args.out or BEDS[args.make].folder}: {info['parameters']:,} parameters, {info['sft_steps']:.0f} "
          f"warm-start steps, held-out sampled accuracy {info['sft_accuracy']:.3f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
