#!/usr/bin/env bash
# vLLM check for reinforce-ada, for a CUDA machine that already has vLLM installed (this script installs nothing;
# scripts/gpu_check.sh is the offline check that needs neither vLLM nor network access).
#
#   1. vLLM generation smoke test on a small instruct model (MODEL, default Qwen/Qwen2.5-0.5B-Instruct, which is
#      downloaded from the hub unless cached; a local checkpoint directory works on a machine without network access):
#        - VLLMGenerator samples 2 prompts x 4 completions; counts, EOS kept at the end of "stop" completions,
#          one log-prob per token;
#        - vLLM's log-probs against an HF forward pass of the same prompt + completion (same weights, bf16);
#        - load_weights() by the GPU's path (weight_sync "direct", as TRL's colocate mode): the HF model's final norm
#          is halved and pushed into the engine; vLLM's log-probs must then match an HF forward pass of the changed
#          model (stale engine weights would not);
#        - load_weights() by vLLM's layer-wise reload (weight_sync "reload", the CPU's path; tied layers re-packed):
#          the embedding (tied to the head in Qwen2.5-0.5B) is scaled and pushed; the same comparison;
#        - sleep mode: sleep() frees the engine, generate() wakes it and re-pushes the weights.
#   2. a 2-step Ada-balanced training run with the standalone trainer and vLLM generation (weights synced each step),
#      bf16 engine and trainer: the rollout/trainer mismatch (mismatch/*) is printed for each step -- the bf16 noise
#      that max_rollout_mismatch's bf16 default (0.05) must stay above; a StaleEngineError here means it does not.
#
# Usage: MODEL=/models/Qwen2.5-0.5B-Instruct bash scripts/gpu_check_vllm.sh
#        (prints "GPU CHECK ... OK" lines; exits non-zero on a failure or when vLLM is not installed)
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL="${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}"
export PYTHONUNBUFFERED=1

export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python -c "import vllm" 2>/dev/null || {
    echo "GPU CHECK FAILED: vLLM is not installed (this script installs nothing: pip install vllm first)" >&2; exit 1; }
python -c "import torch, vllm; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'vllm', vllm.__version__)"

echo "== vLLM generation smoke test on ${MODEL}"
MODEL="$MODEL" python - <<'PY'
import os
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from reinforce_ada import GenerationRequest, Prompt
from reinforce_ada.generation import encode_prompt, get_generator

model_name = os.environ["MODEL"]
tokenizer = AutoTokenizer.from_pretrained(model_name)
model = AutoModelForCausalLM.from_pretrained(model_name, dtype=torch.bfloat16).cuda()
started = time.perf_counter()
gen = get_generator("vllm", model, tokenizer, max_new_tokens=96, temperature=1.0, seed=0, max_model_len=1024,
                    gpu_memory_utilization=0.35, enable_sleep_mode=True)
print(f"engine built in {time.perf_counter() - started:.1f}s")
eos_ids = {tokenizer.eos_token_id, *([model.generation_config.eos_token_id]
                                     if isinstance(model.generation_config.eos_token_id, int)
                                     else model.generation_config.eos_token_id or [])}
requests = [GenerationRequest(Prompt("add", "What is 17 + 25? Answer with the number only."), 4),
            GenerationRequest(Prompt("capital", [{"role": "user", "content": "Name the capital of France."}]), 4)]


def hf_logprobs(request, completion):
    prompt_ids = encode_prompt(tokenizer, request.prompt)
    ids = torch.tensor([prompt_ids + list(completion.token_ids)], device="cuda")
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt_ids):, None])[:, 0].cpu()


def sample_and_compare(tag):
    started = time.perf_counter()
    out = gen.generate(requests)
    seconds = time.perf_counter() - started
    assert [len(o) for o in out] == [4, 4], [len(o) for o in out]
    diffs = []
    for request, completions in zip(requests, out):
        for c in completions:
            assert c.logprobs is not None and len(c.logprobs) == len(c.token_ids), "one log-prob per token"
            if c.finish_reason == "stop":
                assert c.token_ids[-1] in eos_ids, f"a 'stop' completion should end with EOS: {c.token_ids[-3:]}"
            diffs.append((torch.tensor(c.logprobs) - hf_logprobs(request, c)).abs())
    diffs = torch.cat(diffs)
    print(f"[{tag}] {sum(len(c.token_ids) for o in out for c in o)} tokens in {seconds:.2f}s; "
          f"|logprob vLLM - HF| mean {diffs.mean():.4f} max {diffs.max():.4f}")
    for request, completions in zip(requests, out):
        for c in completions[:2]:
            print(f"  {request.prompt.prompt_id}: {c.finish_reason:6s} {len(c.token_ids):3d} tok  {c.text[:70]!r}")
    return out, diffs.mean().item()


out, mean_diff = sample_and_compare("initial weights")
assert mean_diff < 0.1, f"vLLM and HF log-probs disagree (mean abs diff {mean_diff:.3f})"
print("GPU CHECK vllm generate: OK")

# load_weights: change the HF model, push it, and check that vLLM now samples from the new weights.
with torch.no_grad():
    model.model.norm.weight.mul_(0.5)  # flattens every next-token distribution
num = gen.load_weights(model)
print(f"pushed {num} tensors")
_, mean_diff_new = sample_and_compare("after load_weights")
assert mean_diff_new < 0.1, f"after load_weights, vLLM does not follow the new HF weights ({mean_diff_new:.3f})"
print("GPU CHECK vllm load_weights (direct): OK")

gen.weight_sync = "reload"  # vLLM's layer-wise reload, the CPU's path (the tied head re-packed after it)
with torch.no_grad():
    model.get_input_embeddings().weight.mul_(1.5)  # tied to lm_head in Qwen2.5-0.5B
gen.load_weights(model)
_, mean_diff_reload = sample_and_compare("after load_weights by reload")
assert mean_diff_reload < 0.1, f"after the reload, vLLM does not follow the new HF weights ({mean_diff_reload:.3f})"
gen.weight_sync = "direct"
print("GPU CHECK vllm load_weights (reload): OK")

gen.sleep()
free_asleep = torch.cuda.mem_get_info()[0]
_, mean_diff_woken = sample_and_compare("after sleep + generate")
assert mean_diff_woken < 0.1, f"after sleep, the re-pushed weights differ from HF ({mean_diff_woken:.3f})"
print(f"GPU memory free while asleep: {free_asleep / 2**30:.1f} GiB")
print("GPU CHECK vllm sleep mode: OK")
PY

echo "== 2 training steps with vLLM generation on ${MODEL} (standalone trainer)"
rm -rf /tmp/reinforce-ada-gpu-check
python -m reinforce_ada.cli train --model "$MODEL" --generator vllm --dtype bfloat16 \
    --task arithmetic --system-prompt "Answer with the number only." \
    --max-steps 2 --batch-size 16 --samples-per-round 4 --max-rounds 2 --group-size 4 \
    --max-new-tokens 16 --learning-rate 1e-6 --micro-batch-size 16 --eval-prompts 32 --eval-samples 2 \
    --output-dir /tmp/reinforce-ada-gpu-check
python - <<'PY'
import json
summary = json.load(open("/tmp/reinforce-ada-gpu-check/summary.json"))
steps = [json.loads(line) for line in open("/tmp/reinforce-ada-gpu-check/metrics.jsonl") if "train/loss" in line]
assert summary["steps"] == 2 and len(steps) == 2, summary
print({k: summary[k] for k in ("accuracy_before", "accuracy_after", "total_samples", "wall_seconds")})
for r in steps:  # bf16 engine vs bf16 trainer: the noise floor of the stale-engine check
    print({k: r[k] for k in ("step", "mismatch/logprob_diff_mean", "mismatch/logprob_diff_max", "mismatch/k3_kl",
                             "mismatch/is_weight_mean", "mismatch/is_capped_fraction")})
print("GPU CHECK 2-step training with vLLM: OK")
PY
