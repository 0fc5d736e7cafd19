"""VLLMGenerator against a fake ``vllm`` module: request -> SamplingParams, output conversion, weight sync, sleep."""

import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from reinforce_ada.generation import VLLMGenerator, encode_prompt, get_generator
from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.sampling.protocols import GenerationRequest, Generator
from reinforce_ada.types import Prompt


class FakeSamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class FakeEngineModel:
    def __init__(self):
        self.loaded: list[tuple[str, torch.Tensor]] = []

    def load_weights(self, weights):
        self.loaded.extend(weights)


class FakeLLMEngine:
    """The in-process ``LLMEngine`` of the stepped (streaming) path: a request of ``length`` tokens (the prompt's
    last token + 1, ...) finishes after ``length`` steps; aborted requests are dropped."""

    def __init__(self, runner, length=2):
        self.model_executor = SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
        self.input_processor = SimpleNamespace(process_inputs=self._process)
        self.length = length
        self.running: dict[str, list] = {}
        self.added: list = []
        self.aborted: list[str] = []

    @staticmethod
    def _process(request_id, prompt, params, supported_tasks):
        return SimpleNamespace(request_id=request_id, prompt_token_ids=prompt["prompt_token_ids"],
                               sampling_params=params, arrival_time=0.0)

    def get_supported_tasks(self):
        return ("generate",)

    def add_request(self, request_id, request, params):
        assert request.request_id == request_id and request_id not in self.running
        self.added.append(request)
        self.running[request_id] = [request, 0]

    def abort_request(self, request_ids, internal=False):
        self.aborted.extend(request_ids)
        for request_id in request_ids:
            self.running.pop(request_id, None)

    def step(self):
        outputs = []
        for request_id, entry in list(self.running.items()):
            entry[1] += 1
            if entry[1] == self.length:
                del self.running[request_id]
                tokens = [entry[0].prompt_token_ids[-1] + k + 1 for k in range(self.length)]
                sample = SimpleNamespace(token_ids=tokens, finish_reason="length", text="ignored",
                                         logprobs=[{t: SimpleNamespace(logprob=-1.0)} for t in tokens])
                outputs.append(SimpleNamespace(request_id=request_id, finished=True, outputs=[sample]))
        return outputs


class FakeLLM:
    """Answers each prompt with n samples: sample j is the prompt's last token + j + 1, then EOS for odd j."""

    instances: list["FakeLLM"] = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list[tuple[list, list]] = []
        self.events: list[str] = []
        self.engine_model = FakeEngineModel()
        self.llm_engine = FakeLLMEngine(SimpleNamespace(model=self.engine_model))
        FakeLLM.instances.append(self)

    def generate(self, prompts, sampling_params, use_tqdm):
        self.events.append("generate")
        self.calls.append((prompts, sampling_params))
        results = []
        for prompt, params in zip(prompts, sampling_params):
            samples = []
            for j in range(params.kwargs["n"]):
                tokens = [prompt["prompt_token_ids"][-1] + j + 1] + ([1] if j % 2 else [])
                logprobs = [{t: SimpleNamespace(logprob=-0.5 * (k + 1), rank=1)} for k, t in enumerate(tokens)]
                samples.append(SimpleNamespace(token_ids=tokens, logprobs=logprobs, text="ignored",
                                               finish_reason="stop" if j % 2 else "length"))
            results.append(SimpleNamespace(outputs=samples))
        return results

    def reset_prefix_cache(self):
        self.events.append("reset_prefix_cache")

    def sleep(self, level):
        self.events.append(f"sleep{level}")

    def wake_up(self, tags=None):
        self.events.append("wake_up:" + ",".join(tags or []))


class FakePlatform:
    def __init__(self, cpu=False):
        self.cpu = cpu
        self.device_name = "cpu" if cpu else "cuda"

    def is_cpu(self):
        return self.cpu

    def is_sleep_mode_available(self):
        return not self.cpu


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = FakeSamplingParams
    module.platforms = SimpleNamespace(current_platform=FakePlatform())
    monkeypatch.setitem(sys.modules, "vllm", module)
    inputs = types.ModuleType("vllm.inputs.engine")
    inputs.tokens_input = lambda ids: {"type": "token", "prompt_token_ids": ids}
    monkeypatch.setitem(sys.modules, "vllm.inputs", types.ModuleType("vllm.inputs"))
    monkeypatch.setitem(sys.modules, "vllm.inputs.engine", inputs)
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.RequestOutputKind = SimpleNamespace(FINAL_ONLY="final-only")
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    FakeLLM.instances.clear()
    return module


@pytest.fixture(scope="module")
def tokenizer():
    return build_char_tokenizer()


def test_missing_vllm_gives_an_install_hint(monkeypatch, tokenizer):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(ImportError, match=r"pip install reinforce-ada\[vllm\]"):
        VLLMGenerator("some/checkpoint", tokenizer)


def test_engine_options_reach_vllm_LLM(fake_vllm, tokenizer):
    gen = get_generator("vllm", "ckpt/dir", tokenizer, gpu_memory_utilization=0.4, dtype="bfloat16",
                        max_model_len=512, enable_sleep_mode=True, seed=3, engine_kwargs={"enforce_eager": True})
    assert isinstance(gen, Generator)
    kwargs = FakeLLM.instances[-1].kwargs
    assert kwargs["model"] == "ckpt/dir"
    assert (kwargs["gpu_memory_utilization"], kwargs["dtype"], kwargs["max_model_len"]) == (0.4, "bfloat16", 512)
    assert kwargs["enable_sleep_mode"] is True and kwargs["seed"] == 3 and kwargs["enforce_eager"] is True
    assert kwargs["logprobs_mode"] == "processed_logprobs"
    model = build_tiny_model()
    model.name_or_path = "trainer/ckpt"
    VLLMGenerator(model, tokenizer)
    assert FakeLLM.instances[-1].kwargs["model"] == "trainer/ckpt"


def test_requests_map_to_sampling_params_and_outputs_convert(fake_vllm, tokenizer):
    gen = VLLMGenerator("ckpt", tokenizer, max_new_tokens=7, temperature=0.8, top_p=0.9, seed=11)
    requests = [GenerationRequest(Prompt("a", "1+1="), 3), GenerationRequest(Prompt("skip", "2="), 0),
                GenerationRequest(Prompt("b", "12*3="), 2)]
    out = gen.generate(requests)
    llm = FakeLLM.instances[-1]
    prompts, params = llm.calls[-1]
    assert prompts == [{"prompt_token_ids": encode_prompt(tokenizer, requests[0].prompt)},
                       {"prompt_token_ids": encode_prompt(tokenizer, requests[2].prompt)}]  # zero-sample skipped
    for p, n in zip(params, (3, 2)):
        assert {k: v for k, v in p.kwargs.items() if k != "seed"} == dict(
            n=n, temperature=0.8, top_p=0.9, max_tokens=7, logprobs=0, detokenize=False, skip_clone=True)
    seeds = [p.kwargs["seed"] for p in params]
    assert len(set(seeds)) == 2
    assert [len(o) for o in out] == [3, 0, 2]
    last_a = encode_prompt(tokenizer, requests[0].prompt)[-1]
    for j, c in enumerate(out[0]):
        assert c.prompt_id == "a"
        expected_ids = [last_a + j + 1] + ([1] if j % 2 else [])
        assert list(c.token_ids) == expected_ids
        assert c.logprobs == [-0.5 * (k + 1) for k in range(len(expected_ids))]
        assert c.finish_reason == ("stop" if j % 2 else "length")
        assert c.text == tokenizer.decode(expected_ids, skip_special_tokens=True) and "<eos>" not in c.text
    # the next call (next sampler round) draws with other seeds; a same-seeded generator repeats them
    gen.generate(requests)
    assert [p.kwargs["seed"] for p in llm.calls[-1][1]] != seeds
    VLLMGenerator("ckpt", tokenizer, max_new_tokens=7, temperature=0.8, top_p=0.9, seed=11).generate(requests)
    assert [p.kwargs["seed"] for p in FakeLLM.instances[-1].calls[-1][1]] == seeds
    expected = np.random.SeedSequence([11, 0]).generate_state(3) % (2**31 - 1)
    assert seeds == [int(expected[0]), int(expected[2])]


def test_the_streaming_sampler_steps_the_engine_one_request_per_sample(fake_vllm, tokenizer):
    from reinforce_ada.sampling.streaming import SteppedEngine

    gen = VLLMGenerator("ckpt", tokenizer, max_new_tokens=5, seed=7)
    assert isinstance(gen, SteppedEngine)
    engine = FakeLLM.instances[-1].llm_engine
    a, b = Prompt("a", "1+1="), Prompt("b", "2*3=")
    for request_id, prompt in (("r0", a), ("r1", a), ("r2", b)):
        gen.submit(prompt, request_id)
    assert gen.step() == []  # two steps per request
    gen.cancel(["r1", "unknown"])  # a sample no longer wanted is aborted in the engine; an unknown id is ignored
    done = dict(gen.step())
    assert sorted(done) == ["r0", "r2"] and gen.num_aborted == 1 and engine.aborted == ["r1#1"]
    assert done["r0"].prompt_id == "a" and list(done["r0"].token_ids) == [encode_prompt(tokenizer, a)[-1] + 1,
                                                                           encode_prompt(tokenizer, a)[-1] + 2]
    assert done["r0"].logprobs == [-1.0, -1.0] and done["r0"].finish_reason == "length"
    # one prepared request per prompt, copied per sample: vLLM's own ids unique, every sample its own seed,
    # FINAL_ONLY outputs, no detokenisation (the text is decoded here)
    requests = engine.added
    assert [r.request_id for r in requests] == ["r0#0", "r1#1", "r2#2"]
    assert requests[0].prompt_token_ids is requests[1].prompt_token_ids  # prepared once for prompt "a"
    seeds = [r.sampling_params.seed for r in requests]  # set on each sample's copy of the parameters
    assert len(set(seeds)) == 3
    params = requests[0].sampling_params.kwargs
    assert params["n"] == 1 and params["output_kind"] == "final-only" and params["detokenize"] is False
    assert gen.step() == [] and not engine.running
    gen.submit(a, "r0")  # the sampler's ids repeat across steps: vLLM's do not
    assert engine.added[-1].request_id == "r0#3"


def test_without_logprobs(fake_vllm, tokenizer):
    gen = VLLMGenerator("ckpt", tokenizer, logprobs=False)
    out = gen.generate([GenerationRequest(Prompt("a", "1="), 2)])
    assert FakeLLM.instances[-1].calls[-1][1][0].kwargs["logprobs"] is None
    assert all(c.logprobs is None for c in out[0])


def test_load_weights_pushes_every_parameter_and_resets_the_cache(fake_vllm, tokenizer):
    model = build_tiny_model()
    model.name_or_path = "ckpt"
    gen = VLLMGenerator(model, tokenizer)
    llm = FakeLLM.instances[-1]
    num = gen.load_weights(model)
    names = [name for name, _ in llm.engine_model.loaded]
    assert num == len(names) == len(list(model.named_parameters()))
    assert names == [name for name, _ in model.named_parameters()]  # checkpoint names, tied lm_head once
    params = dict(model.named_parameters())
    assert all(torch.equal(tensor, params[name]) for name, tensor in llm.engine_model.loaded)
    assert llm.events[-1] == "reset_prefix_cache"


def test_sleep_mode_wakes_and_resyncs(fake_vllm, tokenizer):
    model = build_tiny_model()
    model.name_or_path = "ckpt"
    gen = VLLMGenerator(model, tokenizer, enable_sleep_mode=True)  # sleep_level=2: weights discarded
    llm = FakeLLM.instances[-1]
    request = [GenerationRequest(Prompt("a", "1="), 1)]
    gen.sleep()
    gen.load_weights(model)  # the trainer's step: weights woken up, then overwritten
    gen.generate(request)  # only the KV cache needs waking
    gen.generate(request)  # awake: nothing to do
    assert llm.events == ["sleep2", "wake_up:weights", "reset_prefix_cache", "wake_up:kv_cache", "generate",
                          "generate"]
    llm.events.clear()
    gen.sleep()
    gen.generate(request)  # slept without a sync: the stored model's weights are pushed again
    assert llm.events == ["sleep2", "wake_up:weights", "reset_prefix_cache", "wake_up:kv_cache", "generate"]
    assert len(llm.engine_model.loaded) == 2 * len(list(model.named_parameters()))


def test_sleep_is_a_no_op_without_sleep_mode(fake_vllm, tokenizer):
    gen = VLLMGenerator("ckpt", tokenizer, enable_sleep_mode=False)
    gen.sleep()
    gen.generate([GenerationRequest(Prompt("a", "1="), 1)])
    assert FakeLLM.instances[-1].events == ["generate"]


def test_bad_options_fail_before_building_the_engine(fake_vllm, tokenizer):
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMGenerator("ckpt", tokenizer, gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="sleep_level"):
        VLLMGenerator("ckpt", tokenizer, sleep_level=3)
    with pytest.raises(ValueError, match="model_path"):
        VLLMGenerator(SimpleNamespace(name_or_path=""), tokenizer)
    assert FakeLLM.instances == []


def test_unknown_backend_names_the_available_ones(tokenizer):
    with pytest.raises(ValueError, match="unknown generator .nope.; registered: hf, openai, vllm, vllm-async"):
        get_generator("nope", None, tokenizer)


def test_named_weights_of_a_lora_model_are_the_merged_base_weights():
    from peft import LoraConfig, get_peft_model

    from reinforce_ada.generation.vllm.weights import named_weights

    base = build_tiny_model()
    expected_names = [name for name, _ in base.named_parameters()]
    model = get_peft_model(base, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.fill_(0.1)  # a non-zero update, so merged differs from base
    q_name = "model.layers.0.self_attn.q_proj.weight"
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    base_q = layer.base_layer.weight.detach().clone()
    delta = (layer.lora_B["default"].weight @ layer.lora_A["default"].weight) * layer.scaling["default"]
    pairs = {name: tensor.clone() for name, tensor in named_weights(model)}
    assert list(pairs) == expected_names
    torch.testing.assert_close(pairs[q_name], base_q + delta)
    assert not layer.merged  # unmerged again after the iteration
    torch.testing.assert_close(layer.base_layer.weight, base_q)


def test_out_of_process_engine_gets_weights_through_collective_rpc(fake_vllm, tokenizer):
    from reinforce_ada.generation.vllm.weights import load_weights_on_worker

    model = build_tiny_model()
    model.name_or_path = "ckpt"
    gen = VLLMGenerator(model, tokenizer)
    llm = FakeLLM.instances[-1]
    llm.llm_engine = SimpleNamespace()  # multiprocess engine: no model_executor in this process
    worker = SimpleNamespace(model_runner=SimpleNamespace(get_model=lambda: llm.engine_model))
    llm.collective_rpc = lambda fn, args=(): [fn(worker, *args)]
    assert gen.load_weights(model) == len(list(model.named_parameters()))
    assert all(t.device.type == "cpu" for _, t in llm.engine_model.loaded)
    assert [n for n, _ in llm.engine_model.loaded] == [n for n, _ in model.named_parameters()]
    assert llm.events[-1] == "reset_prefix_cache"
    assert load_weights_on_worker(worker, [("x", torch.zeros(1))], "direct") == 1


@pytest.fixture
def cpu_platform(fake_vllm, monkeypatch):
    from reinforce_ada.generation.vllm import checks as vllm_checks

    fake_vllm.platforms = SimpleNamespace(current_platform=FakePlatform(cpu=True))
    monkeypatch.setattr(vllm_checks, "_memory", lambda platform: (64 << 30, 60 << 30))  # room for the 0.1 share
    monkeypatch.setattr(vllm_checks, "_held_by_this_process", lambda: 1 << 30)
    return fake_vllm


def test_on_the_cpu_platform_the_defaults_suit_it_and_an_in_memory_model_is_written_out(cpu_platform, tokenizer,
                                                                                          caplog):
    import os

    from reinforce_ada.generation.vllm.checks import EngineSetupError

    model = build_tiny_model(num_heads=2)  # built in memory: no checkpoint folder of its own
    with pytest.raises(EngineSetupError, match="enable_sleep_mode=True: vLLM's cpu platform has no sleep mode"):
        VLLMGenerator(model, tokenizer, enable_sleep_mode=True)  # asked for where there is none: before building
    assert not FakeLLM.instances
    with caplog.at_level("WARNING", logger="reinforce_ada.generation.vllm.engine"):
        gen = VLLMGenerator(model, tokenizer)  # not asked for: off on the CPU, quietly
    kwargs = FakeLLM.instances[-1].kwargs
    assert (gen.weight_sync, gen.enable_sleep_mode, kwargs["enable_sleep_mode"]) == ("reload", False, False)
    assert not [r for r in caplog.records if r.name.startswith("reinforce_ada")]
    assert kwargs["gpu_memory_utilization"] == 0.1 and kwargs["max_model_len"] == model.config.max_position_embeddings
    folder = kwargs["model"]
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= set(os.listdir(folder))
    gen.close()
    assert not os.path.exists(folder)
    cpu_platform.platforms.current_platform = FakePlatform(cpu=False)
    gpu = VLLMGenerator("ckpt", tokenizer)  # a GPU platform: direct sync, the GPU share, sleep mode
    assert gpu.weight_sync == "direct" and FakeLLM.instances[-1].kwargs["gpu_memory_utilization"] == 0.4
    assert gpu.enable_sleep_mode is True


def test_the_reload_path_uses_vllms_reload_then_reprocesses_tied_layers(cpu_platform, tokenizer):
    from reinforce_ada.generation.vllm.weights import reprocess_tied_layers

    processed = []

    class Method:
        def process_weights_after_loading(self, layer):
            processed.append(layer)

    class Engine(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(4, 2)
            self.head = torch.nn.Linear(2, 4, bias=False)
            self.head.weight = self.embed.weight  # tied
            self.other = torch.nn.Linear(2, 2)
            for module in (self.embed, self.head, self.other):
                module.quant_method = Method()

    engine = Engine()
    assert reprocess_tied_layers(engine) == ["head"] and processed == [engine.head]
    model = build_tiny_model()
    model.name_or_path = "ckpt"
    gen = VLLMGenerator(model, tokenizer)
    reloaded = []
    runner = SimpleNamespace(get_model=lambda: engine,
                             reload_weights=lambda weights_iterator, is_checkpoint_format: reloaded.append(
                                 (list(weights_iterator), is_checkpoint_format)))
    FakeLLM.instances[-1].llm_engine.model_executor.driver_worker.model_runner = runner
    processed.clear()
    assert gen.load_weights(model) == len(list(model.named_parameters()))
    ((pairs, checkpoint_format),) = reloaded
    assert checkpoint_format is True and [n for n, _ in pairs] == [n for n, _ in model.named_parameters()]
    assert processed == [engine.head]  # after the reload, the tied head is re-made from the shared weight
    assert FakeLLM.instances[-1].events[-1] == "reset_prefix_cache"


def test_a_lora_model_is_written_merged_for_the_engine(tokenizer):
    import shutil

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from reinforce_ada.generation.vllm.weights import servable_checkpoint

    model = get_peft_model(build_tiny_model(num_heads=2), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.fill_(0.1)
    path, folder = servable_checkpoint(model, tokenizer)
    try:
        loaded = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True)
        ids = torch.tensor([[5, 6, 7, 8]])
        with torch.no_grad():
            torch.testing.assert_close(loaded(ids).logits, model(input_ids=ids).logits)  # the merged policy
    finally:
        folder.cleanup()
        shutil.rmtree(path, ignore_errors=True)
