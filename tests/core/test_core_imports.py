"""``reinforce_ada.core`` imports only the standard library, numpy and torch (and what those two load themselves)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import reinforce_ada.core

_TOP_LEVEL = "import json, sys; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
CORE_DIR = Path(reinforce_ada.core.__file__).parent


def loaded_top_level_modules(*statements: str) -> list[set[str]]:
    """Top-level modules in ``sys.modules`` after each statement, each in a fresh interpreter (run in parallel)."""
    procs = [subprocess.Popen([sys.executable, "-c", f"{s}\n{_TOP_LEVEL}"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for s in statements]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        results.append(set(json.loads(stdout.strip().splitlines()[-1])))
    return results


def test_importing_core_loads_only_stdlib_and_numpy():
    # numpy.random is part of numpy but lazily loaded; it brings numpy's Cython runtime modules with it.
    baseline, loaded = loaded_top_level_modules("import numpy, numpy.random, torch", "import reinforce_ada.core")
    allowed = baseline | set(sys.stdlib_module_names)
    extra = loaded - allowed - {"reinforce_ada"}
    assert not extra, f"`import reinforce_ada.core` pulled in {sorted(extra)} (heavy imports must be lazy)"
    assert "numpy" in loaded and "transformers" not in allowed  # the check has teeth
    # torch is imported where a loss is computed, so the config's checks (which read core's registries) load without it
    assert "torch" not in loaded


def test_core_source_imports_only_stdlib_numpy_torch_and_core():
    allowed = set(sys.stdlib_module_names) | {"numpy", "torch", "__future__"}
    files = sorted(CORE_DIR.glob("*.py"))
    assert len(files) >= 6
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            else:
                continue
            for name in names:
                ok = name.split(".")[0] in allowed or name.startswith("reinforce_ada.core")
                assert ok, f"{path.name} imports {name}"
