"""The README's two set-up commands are the ones CI runs: its test command is, step for step, what ``.ci/run``'s main
pass installs and runs (so the SmolLM2 test does not skip for someone following the README), and its demo command
installs the same way."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_command(after: str) -> list[str]:
    """The steps (split at ``&&``) of the first ``bash`` block after the line starting with ``after``."""
    text = (ROOT / "README.md").read_text()
    block = re.search(rf"^{re.escape(after)}.*?```bash\n(.*?)\n```", text, re.M | re.S)
    assert block, f"README.md has no bash block after {after!r}"
    return [step.strip() for step in block.group(1).split("&&")]


def ci_main_pass() -> list[str]:
    """The install and test commands of ``.ci/run``'s main pass, in order."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('step "main: install'))
    end = next(i for i, line in enumerate(lines) if line.startswith('step "gpu-check'))
    return [line.strip() for line in lines[start:end] if re.match(r"(pip install|HF_HUB_OFFLINE=1 python -m pytest)",
                                                                   line.strip())]


def test_the_readme_test_command_is_what_ci_runs():
    assert readme_command("Tests") == ci_main_pass()


def test_the_readme_demo_installs_as_ci_does():
    demo = readme_command("Main job")
    assert demo[-1] == "reinforce-ada train" and demo[:-1] == ci_main_pass()[:2]
