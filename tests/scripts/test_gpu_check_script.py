"""scripts/gpu_check.sh on a CPU: the carried-wheels bookkeeping, and that it installs nothing unless asked.

The full ``--dry-run`` (download the wheels, run every check on the CPU) is a step of ``.ci/run``: it needs the
registry. Here a hand-made wheel of a made-up package stands in for the carried ones (``GPU_CHECK_WHEELS_LIST``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
PROBE = "reinforce_ada_gpu_check_probe"


def make_wheel(folder: Path, name: str = PROBE, version: str = "1.0") -> Path:
    """A minimal pure-Python wheel holding one module."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": "VALUE = 1\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def run(*args: str, wheels_list: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_WHEELS_LIST": str(wheels_list)}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=ROOT)


def carried_wheels(*args: str, wheels_list: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPU_CHECK_WHEELS_LIST": str(wheels_list)}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "carried_wheels.py"), *args],
                          capture_output=True, text=True, env=env, timeout=60)


def test_the_wheel_list_names_missing_duplicated_and_oversized_wheels(tmp_path):
    listing = tmp_path / "wheels.txt"
    listing.write_text("# comment\nfoo-bar==1.0\nbaz==2.0  # pinned\n")
    folder = tmp_path / "wheels"
    folder.mkdir()
    result = carried_wheels("list", str(folder), wheels_list=listing)
    assert result.returncode == 1
    assert "foo-bar==1.0: no wheel" in result.stderr and "baz==2.0: no wheel" in result.stderr

    (folder / "foo_bar-1.0-py3-none-any.whl").write_bytes(b"x" * 2**20)
    (folder / "baz-2.0-py3-none-any.whl").write_bytes(b"x" * 2**19)
    result = carried_wheels("list", str(folder), wheels_list=listing)
    assert result.returncode == 0, result.stderr
    assert "1.50 MiB  in all (2 wheels; limit 64 MiB)" in result.stdout

    (folder / "baz-1.9-py3-none-any.whl").write_bytes(b"x")
    result = carried_wheels("list", str(folder), wheels_list=listing)
    assert result.returncode == 1 and "baz: several wheels" in result.stderr

    (folder / "baz-1.9-py3-none-any.whl").unlink()
    with open(folder / "foo_bar-1.0-py3-none-any.whl", "r+b") as big:
        big.truncate(65 * 2**20)
    result = carried_wheels("list", str(folder), wheels_list=listing)
    assert result.returncode == 1 and "more than 64 MiB" in result.stderr

    listing.write_text("unpinned>=1\n")
    result = carried_wheels("list", str(folder), wheels_list=listing)
    assert result.returncode == 1 and "not an exact pin" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the check would go on to run for real")
def test_the_check_installs_nothing_unless_asked_and_then_only_into_its_own_folder(tmp_path):
    listing = tmp_path / "wheels.txt"
    listing.write_text(f"{PROBE}==1.0\n")
    folder = tmp_path / "wheels"
    wheel = make_wheel(folder)

    asked_not = run("--wheels", str(folder), wheels_list=listing)
    assert asked_not.returncode == 2, asked_not.stdout + asked_not.stderr
    assert str(wheel) in asked_not.stdout and "--install" in asked_not.stderr
    assert not (folder / "site").exists()

    installed = run("--install", "--wheels", str(folder), wheels_list=listing)
    assert (folder / "site" / f"{PROBE}.py").exists(), installed.stdout + installed.stderr
    # The environment itself is unchanged: a fresh interpreter does not see the package.
    probe = subprocess.run([sys.executable, "-c", f"import importlib.util; print(importlib.util.find_spec({PROBE!r}))"],
                           capture_output=True, text=True, env={k: v for k, v in os.environ.items()
                                                                if k != "PYTHONPATH"})
    assert probe.stdout.strip() == "None"
    assert importlib.util.find_spec(PROBE) is None
    # Without CUDA the check fails (never "skipped" with exit status 0), and stops before anything else.
    assert installed.returncode == 1
    assert "CHECK cuda: FAILED" in installed.stdout and "GPU CHECK FAILED" in installed.stdout
    assert "SKIP" not in (installed.stdout + installed.stderr).upper()


def test_a_dry_run_without_the_wheels_folder_fails_and_says_how_to_build_it(tmp_path):
    listing = tmp_path / "wheels.txt"
    listing.write_text(f"{PROBE}==1.0\n")
    result = run("--dry-run", "--wheels", str(tmp_path / "absent"), wheels_list=listing)
    assert result.returncode == 1
    assert "no wheel" in result.stderr and "bash scripts/gpu_check.sh --download" in result.stderr
