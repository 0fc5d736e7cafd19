"""The tiny model's runs compute with torch's portable CPU kernels and MKL's reproducible path, whatever the processor
offers, so the demo prints the same figure on every x86 CPU; other models keep the fastest kernels; a variable the
user set is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from reinforce_ada.cpu_numerics import PORTABLE_NUMERICS, pin_portable_numerics, runs_portable

_PROBE = """
import json, sys
from reinforce_ada import cli
code = cli.main(sys.argv[1:])
import torch
print(json.dumps({"code": code, "capability": torch.backends.cpu.get_cpu_capability(),
                  "mkl_cbwr": __import__("os").environ.get("MKL_CBWR")}))
"""


def _in_fresh_process(*argv: str, env: dict | None = None) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in PORTABLE_NUMERICS}
    environ.update(env or {}, HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], env=environ, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _train_in_fresh_process(tmp_path, *options: str, env: dict | None = None) -> dict:
    return _in_fresh_process("train", "--max-steps", "1", "--eval-prompts", "4", "--batch-size", "4", "--output-dir",
                             str(tmp_path / "run"), *options, env=env)


def test_the_tiny_model_trains_and_evaluates_on_the_portable_kernels_whatever_the_cpu(tmp_path):
    probe = _train_in_fresh_process(tmp_path)
    assert probe == {"code": 0, "capability": "DEFAULT", "mkl_cbwr": "COMPATIBLE"}
    probe = _in_fresh_process("eval", str(tmp_path / "run"), "--k", "1", "--json")
    assert probe == {"code": 0, "capability": "DEFAULT", "mkl_cbwr": "COMPATIBLE"}


def test_a_capability_the_user_chose_is_kept(tmp_path):
    probe = _train_in_fresh_process(tmp_path, env={"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AUTO"})
    assert probe["mkl_cbwr"] == "AUTO" and probe["capability"] == "DEFAULT"


def test_only_the_tiny_model_on_the_hf_generator_is_pinned():
    assert runs_portable({}) and runs_portable({"model": "tiny", "generator": "hf", "strategy": "grpo"})
    assert not runs_portable({"model": "smollm2-135m"})
    assert not runs_portable({"generator": "vllm"})


def test_pinning_sets_only_what_is_unset_and_nothing_once_torch_is_loaded(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    environ = {"MKL_CBWR": "AVX2"}
    assert pin_portable_numerics(environ) == {"ATEN_CPU_CAPABILITY": "default"}
    assert environ == {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "default"}
    monkeypatch.setitem(sys.modules, "torch", object())
    environ = {}
    assert pin_portable_numerics(environ) == {} and environ == {}
