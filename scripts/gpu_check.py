"""What the CPU test suite cannot run: reinforce-ada's training paths on a CUDA GPU, offline.

Run by ``scripts/gpu_check.sh`` (which prepares the carried wheels); it can also be run directly. Every check prints
one line, ``CHECK <name>: OK ...`` or ``CHECK <name>: FAILED ...``, and the exit status is 1 when any check failed or
could not run (there is no "skipped": a machine without CUDA fails the ``cuda`` check and everything after it).

    python scripts/gpu_check.py              # on a CUDA GPU: real shapes (a ~0.5B Qwen2-shaped model)
    python scripts/gpu_check.py --cpu        # the same checks on the CPU with tiny shapes (what --dry-run runs)

Checks, in order (all models are randomly initialised and built locally; nothing is downloaded):

* ``cuda``            -- a CUDA device is there (``--cpu``: skipped by design, printed as "CPU run").
* ``imports``         -- torch, transformers, trl, datasets, math-verify and reinforce_ada import; versions printed;
                         the math verifier scores "\\boxed{4}" against "4" as correct.
* ``trainer-tiny``    -- the standalone trainer (``reinforce_ada.training.Trainer``), 2 Ada-balanced steps with the
                         tiny char-level Qwen2 and a reward with mixed values (token-id parity): the weights move,
                         the metrics are finite, and ``checkpoint-2`` loads back with the trained weights.
* ``trainer-0.5b-*``  -- the same 2 steps with a Qwen2.5-0.5B-shaped model (494M parameters: 24 layers, hidden 896,
                         vocabulary 151936; ``--cpu``: 2 layers, hidden 64, vocabulary 1024), once with float32 and
                         once with bfloat16 weights; prints samples/s, generated tokens/s and peak GPU memory.
* ``trl``             -- 2 steps of ``AdaGRPOTrainer`` (TRL) on the tiny model: the global step is 2, the weights
                         move, and TRL's logs carry the sampler's ``ada/`` metrics.
* ``bf16-vs-fp32``    -- per-token log-probabilities (response tokens) and the PPO-clip loss of the 0.5B-shaped model
                         in bfloat16 against the same weights in float32, on the same sequences: mean |dlogp| <=
                         LOGP_MEAN_TOL, max |dlogp| <= LOGP_MAX_TOL, |dloss| <= LOSS_TOL. A randomly initialised
                         model's next-token distributions are nearly flat, so this catches a broken bf16 path (a
                         wrong cast, padding or mask handled differently, an overflow), not the size of bf16's
                         error on a trained model.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import sys
import tempfile
import time
import traceback
from pathlib import Path

# bf16 vs fp32 agreement, on the response tokens of random sequences (see ``check_bf16_vs_fp32``).
LOGP_MEAN_TOL = 0.02  # nats: mean absolute difference of per-token log-probabilities
LOGP_MAX_TOL = 0.25  # nats: largest absolute difference
LOSS_TOL = 0.01  # absolute difference of the PPO-clip loss (advantages ~ N(0, 1))

QWEN2_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936)
TINY_SHAPE = dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1024)


def parity_reward(prompts, completions):
    """1 when the sum of a completion's token ids is even: mixed rewards from any model, so groups have signal."""
    return [float(sum(c.token_ids) % 2 == 0) for c in completions]


def qwen2_model(shape: dict, seed: int = 0):
    """A randomly initialised Qwen2ForCausalLM of the given shape (float32, on the CPU)."""
    from reinforce_ada.models.tiny import build_qwen2

    return build_qwen2(seed=seed, **shape, max_position_embeddings=4096, rope_theta=1e6)


class Checks:
    def __init__(self, device: str, workdir: Path):
        self.device, self.workdir = device, workdir
        self.failed: list[str] = []

    def run(self, name: str, check, *args) -> None:
        started = time.perf_counter()
        try:
            detail = check(*args)
        except Exception as err:  # noqa: BLE001 -- one line per check; the traceback goes to stderr
            traceback.print_exc()
            self.failed.append(name)
            print(f"CHECK {name}: FAILED ({type(err).__name__}: {err}) [{time.perf_counter() - started:.1f}s]",
                  flush=True)
            return
        print(f"CHECK {name}: OK {detail} [{time.perf_counter() - started:.1f}s]", flush=True)


def check_cuda() -> str:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False (use --cpu, or bash scripts/gpu_check.sh --dry-run, "
                           "for the CPU run)")
    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def check_imports() -> str:
    import reinforce_ada  # noqa: F401
    import trl  # noqa: F401
    from reinforce_ada.verifiers import get_verifier
    from reinforce_ada.types import Completion, Prompt

    versions = {name: importlib.metadata.version(name)
                for name in ("torch", "transformers", "trl", "datasets", "math-verify")}
    verifier = get_verifier("math")
    rewards = verifier([Prompt("p", "2+2?", answer="4")] * 2,
                       [Completion("p", "so \\boxed{4}"), Completion("p", "so \\boxed{5}")])
    if list(rewards) != [1.0, 0.0]:
        raise AssertionError(f"math verifier gave {rewards}, expected [1.0, 0.0]")
    return " ".join(f"{k} {v}" for k, v in versions.items())


def _train(checks: Checks, name: str, model, **overrides):
    """2 steps of the standalone trainer with ``model``; returns (trainer, summary, weights before)."""
    from reinforce_ada.config import TrainConfig
    from reinforce_ada.models import build_char_tokenizer
    from reinforce_ada.training import Trainer

    settings = dict(model="tiny", task="arithmetic", max_steps=2, batch_size=8,
                    sampler=dict(samples_per_round=4, max_rounds=2, group_size=4), max_new_tokens=8, eval_prompts=0,
                    learning_rate=1e-3, device=checks.device,
                    output_dir=str(checks.workdir / name), seed=0, num_threads=1 if checks.device == "cpu" else 0)
    settings.update(overrides)
    trainer = Trainer(TrainConfig(**settings), model=model, tokenizer=build_char_tokenizer(),
                      verifier=parity_reward)
    before = {k: v.detach().float().cpu().clone() for k, v in trainer.model.state_dict().items()}
    summary = trainer.train()
    if summary["steps"] != 2:
        raise AssertionError(f"{summary['steps']} steps ran, expected 2")
    return trainer, summary, before


def _changed(before, model) -> int:
    """How many of the model's tensors differ from ``before`` (float32 copies on the CPU)."""
    import torch

    after = model.state_dict()
    return sum(not torch.equal(before[k], after[k].detach().float().cpu()) for k in before)


def check_trainer_tiny(checks: Checks) -> str:
    import torch
    from transformers import AutoModelForCausalLM

    from reinforce_ada.models import build_tiny_model

    trainer, summary, before = _train(checks, "trainer-tiny", build_tiny_model())
    if next(trainer.model.parameters()).device.type != checks.device:
        raise AssertionError(f"the model is on {next(trainer.model.parameters()).device}, not {checks.device}")
    changed = _changed(before, trainer.model)
    if changed < len(before) // 2:
        raise AssertionError(f"only {changed} of {len(before)} tensors moved")
    saved = checks.workdir / "trainer-tiny" / "checkpoint-2" / "model"
    reloaded = AutoModelForCausalLM.from_pretrained(saved, use_safetensors=True).state_dict()
    trained = trainer.model.state_dict()
    if not all(torch.equal(reloaded[k], trained[k].cpu()) for k in trained):
        raise AssertionError(f"{saved} does not hold the trained weights")
    return (f"{summary['total_samples']} samples, {changed}/{len(before)} tensors moved, "
            f"checkpoint-2 loads back")


def check_trainer_05b(checks: Checks, shape: dict, dtype: str) -> str:
    import torch

    model = qwen2_model(shape).to(getattr(torch, dtype))
    num_params = sum(p.numel() for p in model.parameters())
    cuda = checks.device == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    new_tokens = 64 if cuda else 8
    trainer, summary, before = _train(checks, f"trainer-0.5b-{dtype}", model, batch_size=16 if cuda else 4,
                                      max_new_tokens=new_tokens, learning_rate=1e-6, micro_batch_size=16,
                                      dtype=dtype)
    changed = _changed(before, trainer.model)
    if dtype == "float32" and changed < len(before) // 2:
        raise AssertionError(f"only {changed} of {len(before)} tensors moved")
    seconds = summary["wall_seconds"]
    memory = f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if cuda else ""
    del trainer
    if cuda:
        torch.cuda.empty_cache()
    return (f"{num_params / 1e6:.1f}M params, {summary['total_samples']} samples ({summary['total_tokens']} tokens) "
            f"in {seconds:.1f}s: {summary['total_samples'] / seconds:.1f} samples/s, "
            f"{summary['total_tokens'] / seconds:.0f} tokens/s{memory}; {changed}/{len(before)} tensors moved "
            f"at lr 1e-6")


def check_trl(checks: Checks) -> str:
    import torch
    from datasets import Dataset

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    def reward(prompts, completions, **kwargs):
        return [float(len(c) % 2 == 0) for c in completions]

    model, tokenizer = build_tiny_model(), build_char_tokenizer()
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    cuda = checks.device == "cuda"
    args = AdaGRPOConfig(output_dir=str(checks.workdir / "trl"), use_cpu=not cuda, bf16=cuda, report_to=[],
                         save_strategy="no", per_device_train_batch_size=8, num_generations=2, samples_per_round=2,
                         max_rounds=3, exit_rule="balanced", max_completion_length=8, max_steps=2, logging_steps=1,
                         learning_rate=1e-2, seed=0)
    dataset = Dataset.from_dict({"prompt": [f"{a}+{a}=" for a in range(1, 9)]})
    trainer = AdaGRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=dataset,
                             processing_class=tokenizer)
    trainer.train()
    if trainer.state.global_step != 2:
        raise AssertionError(f"global_step {trainer.state.global_step}, expected 2")
    after = dict(trainer.model.named_parameters())
    changed = sum(not torch.equal(v, after[k].detach().to(v.device)) for k, v in before.items())
    if not changed:
        raise AssertionError("no parameter changed after two steps")
    logs = [h for h in trainer.state.log_history if "loss" in h]
    ada = sorted({k for h in logs for k in h if k.startswith("ada/")})
    if len(logs) != 2 or not ada:
        raise AssertionError(f"{len(logs)} training logs, ada/ metrics: {ada}")
    device = next(trainer.model.parameters()).device.type
    return (f"trl {importlib.metadata.version('trl')} on {device}: 2 steps, {changed}/{len(before)} tensors moved, "
            f"loss {logs[-1]['loss']:.4f}, logged {', '.join(ada[:3])}, ...")


def check_bf16_vs_fp32(checks: Checks, shape: dict) -> str:
    """Log-probabilities and PPO-clip loss in bf16 against fp32, same weights, same random sequences."""
    import torch

    from reinforce_ada.core.losses import ppo_clip_loss

    cuda = checks.device == "cuda"
    batch, prompt_len, response_len = (16, 128, 128) if cuda else (4, 16, 16)
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(3, shape["vocab_size"], (batch, prompt_len + response_len), generator=generator)
    attention = torch.ones_like(input_ids)
    attention[: batch // 2, : prompt_len // 2] = 0  # left padding on half the rows, as generation produces
    mask = torch.zeros(batch, prompt_len + response_len - 1)
    mask[:, prompt_len - 1:] = 1.0  # (B, L-1): the response tokens' positions among the next-token predictions
    advantages = torch.randn(batch, generator=generator)
    input_ids, attention, mask, advantages = (t.to(checks.device) for t in (input_ids, attention, mask, advantages))

    def logprobs_of(model):  # (B, L-1), as the trainer computes them: logits cast to float32 before log_softmax
        logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1].float()
        return torch.log_softmax(logits, -1).gather(-1, input_ids[:, 1:, None])[..., 0]

    model = qwen2_model(shape).to(checks.device)
    with torch.no_grad():
        fp32 = logprobs_of(model)
        model.to(torch.bfloat16)
        bf16 = logprobs_of(model)
    del model
    loss32, _ = ppo_clip_loss(fp32, fp32, advantages, mask)
    loss16, _ = ppo_clip_loss(bf16, fp32, advantages, mask)  # bf16 policy against fp32 "old" log-probs
    diff = (bf16 - fp32).abs()[mask.bool()]
    mean, largest, dloss = float(diff.mean()), float(diff.max()), abs(float(loss16 - loss32))
    detail = (f"mean |dlogp| {mean:.4f} (tol {LOGP_MEAN_TOL}), max {largest:.3f} (tol {LOGP_MAX_TOL}), "
              f"|dloss| {dloss:.5f} (tol {LOSS_TOL}); fp32 mean logp {float(fp32[mask.bool()].mean()):.2f}")
    if not (mean <= LOGP_MEAN_TOL and largest <= LOGP_MAX_TOL and dloss <= LOSS_TOL) or not math.isfinite(dloss):
        raise AssertionError(detail)
    return detail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="run every check on the CPU with tiny shapes")
    parser.add_argument("--workdir", type=Path, default=None, help="where runs are written (default: a temp dir)")
    args = parser.parse_args()
    import logging
    import os

    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="reinforce_ada_gpu_check_"))
    checks = Checks("cpu" if args.cpu else "cuda", workdir)
    shape = TINY_SHAPE if args.cpu else QWEN2_05B
    started = time.perf_counter()
    if args.cpu:
        import torch

        torch.set_num_threads(1)
        print("CHECK cuda: not checked (CPU run with tiny shapes)", flush=True)
    else:
        checks.run("cuda", check_cuda)
        if checks.failed:
            print("GPU CHECK FAILED: no CUDA device; nothing else was run", flush=True)
            return 1
    checks.run("imports", check_imports)
    checks.run("trainer-tiny", check_trainer_tiny, checks)
    checks.run("trainer-0.5b-float32", check_trainer_05b, checks, shape, "float32")
    checks.run("trainer-0.5b-bfloat16", check_trainer_05b, checks, shape, "bfloat16")
    checks.run("trl", check_trl, checks)
    checks.run("bf16-vs-fp32", check_bf16_vs_fp32, checks, shape)
    total = time.perf_counter() - started
    where = "CPU (tiny shapes)" if args.cpu else "CUDA"
    if checks.failed:
        print(f"GPU CHECK FAILED on {where}: {', '.join(checks.failed)} [{total:.0f}s]; runs in {workdir}",
              flush=True)
        return 1
    print(f"GPU CHECK PASSED on {where}: all checks OK [{total:.0f}s]; runs in {workdir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
