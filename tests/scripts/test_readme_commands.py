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


def command_table() -> list[tuple[str, str]]:
    """The README's command table: (usage, what it does) per row."""
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^\| `(reinforce-ada [^`]+)` \| (.+) \|$", text, re.M)


def test_the_command_table_names_options_each_command_has_and_the_option_each_file_needs():
    from reinforce_ada import cli

    parsers = next(a for a in cli.build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices
    rows = command_table()
    assert rows and {usage.split()[1] for usage, _ in rows} <= set(parsers)
    for usage, what in rows:
        known = parsers[usage.split()[1]]._option_string_actions
        assert [option for option in re.findall(r"--[a-z][a-z-]*", usage) if option not in known] == [], usage
        if re.search(r"generations|jsonl", what, re.I):  # a file of generations only when an option asks for it
            assert "`--out`" in what, (usage, what)
