"""The sampling protocols live in one small module that backends import instead of the sampling loop."""

import ast
import pathlib

import reinforce_ada
import reinforce_ada.sampler as sampler
import reinforce_ada.sampling.protocols as protocols

PACKAGE = pathlib.Path(reinforce_ada.__file__).parent
NAMES = ["GenerationError", "GenerationRequest", "Generator", "PartialGenerationError", "Verifier", "VerifierError"]


def test_old_import_paths_name_the_same_objects():
    for name in NAMES:
        assert getattr(sampler, name) is getattr(protocols, name), name
    for name in ["GenerationError", "GenerationRequest", "Generator", "Verifier", "VerifierError"]:
        assert getattr(reinforce_ada, name) is getattr(protocols, name), name


def _imported_modules(path: pathlib.Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


def test_protocols_depend_only_on_types():
    imported = {m for m in _imported_modules(PACKAGE / "sampling" / "protocols.py") if m.startswith("reinforce_ada")}
    assert imported == {"reinforce_ada.types"}


def test_generation_backends_do_not_import_the_sampling_loop():
    for path in sorted((PACKAGE / "generation").glob("*.py")):
        assert "reinforce_ada.sampler" not in _imported_modules(path), f"{path.name} imports reinforce_ada.sampler"
