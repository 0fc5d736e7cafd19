"""The vLLM engine's settings checked before it is built (memory share, head size, sleep mode), and vLLM's own start
failures as one line naming the setting -- on fake platforms and memory figures, without vLLM."""

import pytest

from reinforce_ada.errors import ConfigError, UserError
from reinforce_ada.generation.vllm import checks as vllm_checks
from reinforce_ada.generation.vllm.checks import (EngineSetupError, EngineStartError, check_engine_setup,
                                                  engine_start_error)
from reinforce_ada.models import build_tiny_model
from test_vllm import FakePlatform as Platform  # the generation tests' stand-in for vLLM's platform

GIB = 1 << 30


@pytest.fixture
def machine(monkeypatch):
    """16 GiB of memory, 12 GiB of it available; this process holds 1 GiB; the CPU attention's head sizes."""
    monkeypatch.setattr(vllm_checks, "_memory", lambda platform: (16 * GIB, 12 * GIB))
    monkeypatch.setattr(vllm_checks, "_held_by_this_process", lambda: GIB)
    monkeypatch.setattr(vllm_checks, "_cpu_head_sizes", lambda: [32, 64, 128])
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)


def test_a_memory_share_the_cpu_engine_cannot_start_with_is_named_before_it_is_built(machine):
    model = build_tiny_model()
    with pytest.raises(EngineSetupError, match=r"memory share \(gpu_memory_utilization; train: "
                                               r"--vllm-gpu-memory-utilization\) is 0.001: 0.001 x 16.0 GiB of RAM = "
                                               r"0.02 GiB, not more than what this process holds already \(1.00 GiB"
                                               r".* so nothing is left for the KV cache; give more than 0.06"):
        check_engine_setup(Platform(cpu=True), model, memory_share=0.001)
    with pytest.raises(EngineSetupError, match=r"is 0.9: 0.9 x 16.0 GiB of RAM = 14.40 GiB, but only 12.00 GiB is "
                                               r"available; give at most 0.75"):
        check_engine_setup(Platform(cpu=True), model, memory_share=0.9)
    check_engine_setup(Platform(cpu=True), model, memory_share=0.1)  # 1.6 GiB: room for the KV cache
    # an engine in processes of its own (AsyncLLM) is not charged with what this process holds
    check_engine_setup(Platform(cpu=True), model, memory_share=0.01, in_this_process=False)


def test_the_kv_cache_of_one_sequence_counts(machine, monkeypatch):
    model = build_tiny_model()  # 2 layers x 1 kv head x 32 x 4 bytes x 2 (K and V) = 512 bytes a token
    monkeypatch.setattr(vllm_checks, "_held_by_this_process", lambda: 0)
    share = (512 * 4096 + sum(p.numel() for p in model.parameters()) * 4) / (16 * GIB)
    with pytest.raises(EngineSetupError, match=r"one 4096-token sequence's KV cache"):
        check_engine_setup(Platform(cpu=True), model, memory_share=share * 0.99, max_model_len=4096)
    check_engine_setup(Platform(cpu=True), model, memory_share=share * 1.01, max_model_len=4096)


def test_an_explicit_cpu_kv_cache_skips_the_share(machine, monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    check_engine_setup(Platform(cpu=True), build_tiny_model(), memory_share=0.001)


def test_a_gpu_share_must_be_free_and_hold_the_weights(machine, monkeypatch):
    model = build_tiny_model()
    with pytest.raises(EngineSetupError, match=r"0.9 x 16.0 GiB of GPU memory = 14.40 GiB, but only 12.00 GiB is "
                                               r"free; give at most 0.75$"):
        check_engine_setup(Platform(cpu=False), model, memory_share=0.9)
    check_engine_setup(Platform(cpu=False), model, memory_share=0.4)  # a GPU's share is not charged this process
    monkeypatch.setattr(vllm_checks, "weight_bytes", lambda model, per_value: 8 * GIB)
    with pytest.raises(EngineSetupError, match=r"not more than the model's weights \(8.00 GiB\)"):
        check_engine_setup(Platform(cpu=False), model, memory_share=0.4)


def test_a_head_size_the_cpu_attention_does_not_serve_is_named(machine):
    with pytest.raises(EngineSetupError, match=r"the model's head size is 16 \(hidden_size 64 / 4 attention heads\), "
                                               r"which vLLM's CPU attention does not serve \(head sizes 32, 64, 128\)"):
        check_engine_setup(Platform(cpu=True), build_tiny_model(num_heads=4), memory_share=0.1)
    check_engine_setup(Platform(cpu=True), build_tiny_model(num_heads=2), memory_share=0.1)
    check_engine_setup(Platform(cpu=False), build_tiny_model(num_heads=4), memory_share=0.1)  # GPUs: vLLM chooses


def test_a_checkpoint_folder_is_read_for_its_shape(machine, tmp_path):
    build_tiny_model(num_heads=4).save_pretrained(tmp_path)
    with pytest.raises(EngineSetupError, match="head size is 16"):
        check_engine_setup(Platform(cpu=True), str(tmp_path), memory_share=0.1)
    check_engine_setup(Platform(cpu=True), str(tmp_path / "missing"), memory_share=0.1)  # no config: vLLM's turn


def test_sleep_mode_asked_for_where_there_is_none(machine):
    with pytest.raises(EngineSetupError, match="enable_sleep_mode=True: vLLM's cpu platform has no sleep mode"):
        check_engine_setup(Platform(cpu=True), build_tiny_model(), memory_share=0.1, sleep_mode=True)
    check_engine_setup(Platform(cpu=True), build_tiny_model(), memory_share=0.1, sleep_mode=None)
    check_engine_setup(Platform(cpu=False), build_tiny_model(), memory_share=0.1, sleep_mode=True)


def test_the_errors_are_the_kinds_the_command_line_prints_as_one_line():
    assert issubclass(EngineSetupError, ConfigError) and issubclass(EngineStartError, UserError)


def test_a_start_failure_is_one_line_with_vllms_reason_and_the_setting():
    try:
        try:
            raise ValueError("Available memory on node 0 (20.83/23.54 GiB) on kv cache allocation is less than\n"
                             "requested memory for kv (-0.06/0.64 GiB). Reduce CPU memory used by other processes.")
        except ValueError as inner:
            raise RuntimeError("worker failed") from inner
    except RuntimeError as err:
        message = str(engine_start_error(err, "/models/m"))
    assert "\n" not in message
    assert message.startswith("the vLLM engine for /models/m did not start: ValueError: Available memory on node 0")
    assert message.endswith("the setting to change: the engine's memory share (gpu_memory_utilization; train: "
                            "--vllm-gpu-memory-utilization) (or VLLM_CPU_KVCACHE_SPACE=<GiB> on the CPU)")
    other = str(engine_start_error(RuntimeError("Engine core initialization failed. See root cause above."), "m"))
    assert other.endswith("(the engine process's own log above says why)")
    assert "setting to change" not in other


def test_a_seeded_engine_on_the_cpu_prefills_whole_prompts_only():
    # vLLM rewinds a partly prefilled request's generator with set_offset, which CPU generators lack: chunked prefill off
    model = build_tiny_model()  # max_position_embeddings 64: the step budget stays vLLM's default 4096
    assert vllm_checks.seeded_cpu_scheduling(Platform(cpu=True), model, seed=0, max_model_len=None) == {
        "enable_chunked_prefill": False, "max_num_batched_tokens": 4096}
    assert vllm_checks.seeded_cpu_scheduling(Platform(cpu=True), model, seed=0, max_model_len=8192) == {
        "enable_chunked_prefill": False, "max_num_batched_tokens": 8192}  # a budget that holds one longest prompt
    assert vllm_checks.seeded_cpu_scheduling(Platform(cpu=True), model, seed=0, max_model_len=None,
                                             engine_kwargs={"max_num_batched_tokens": 256}) == {
        "enable_chunked_prefill": False}  # the caller's budget is kept
    assert vllm_checks.seeded_cpu_scheduling(Platform(cpu=False), model, seed=0, max_model_len=None) == {}
    assert vllm_checks.seeded_cpu_scheduling(Platform(cpu=True), model, seed=None, max_model_len=None) == {}
    with pytest.raises(EngineSetupError, match=r"enable_chunked_prefill=True with a seed on vLLM's CPU platform: .*"
                                               r"CPU Generator does not use offset"):
        vllm_checks.seeded_cpu_scheduling(Platform(cpu=True), model, seed=0, max_model_len=None,
                                          engine_kwargs={"enable_chunked_prefill": True})
