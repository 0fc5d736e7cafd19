"""The sampling protocols live in one small module that backends import instead of the sampling loop."""

import ast
import pathlib

import reinforce_ada
import reinforce_ada.sampling.protocols as protocols

PACKAGE = pathlib.Path(reinforce_ada.__file__).parent


def test_the_package_exports_the_protocols_objects():
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


def test_protocols_depend_only_on_types_and_errors():
    imported = {m for m in _imported_modules(PACKAGE / "sampling" / "protocols.py") if m.startswith("reinforce_ada")}
    assert imported == {"reinforce_ada.types", "reinforce_ada.errors"}


def test_generation_backends_do_not_import_the_sampling_loop():
    for path in sorted((PACKAGE / "generation").glob("*.py")):
        imported = _imported_modules(path)
        for loop in ("reinforce_ada.sampling.sampler", "reinforce_ada.sampling.streaming"):
            assert loop not in imported, f"{path.name} imports {loop}"
