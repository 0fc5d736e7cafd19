"""Collection rules for the doctests inside the package (``testpaths`` includes ``reinforce_ada``)."""

import importlib.util

collect_ignore_glob = ["benchmarks/*", "examples/*", "scripts/*", "tests/*/conftest.py"]  # conftests: plugins, not doctests
if importlib.util.find_spec("verl") is None:  # the verl plugin's modules import verl at module level
    collect_ignore_glob.append("reinforce_ada/integrations/verl/*")
if importlib.util.find_spec("vllm") is None:  # vLLM's side of the shared-memory weight transfer imports vLLM
    collect_ignore_glob.append("reinforce_ada/generation/vllm/shm.py")
if importlib.util.find_spec("trl") is None:
    collect_ignore_glob.append("reinforce_ada/integrations/trl/*")
