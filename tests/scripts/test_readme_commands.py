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


FIRST_SCREEN = 45
"""Lines a newcomer sees without scrolling: the two set-up commands and what the demo prints stand within them."""


def code_blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """The fenced code blocks of ``text``: (the line its fence opens on, its info string, its lines)."""
    blocks, opened = [], None
    for number, line in enumerate(text.splitlines()):
        if opened is None and line.startswith("```"):
            opened = (number, line[3:].strip(), [])
        elif opened is not None and line == "```":
            blocks.append(opened)
            opened = None
        elif opened is not None:
            opened[2].append(line)
    return blocks


def scan_block() -> list[str]:
    """The command lines a newcomer scans first: every shell block (``bash`` or bare; not the ``text`` of what a
    command prints) from the top of the README through its "What to type next" section."""
    text = (ROOT / "README.md").read_text()
    head = text[:text.index("\n## ", text.index("\n## What to type next") + 1)]
    lines = [line for _, info, block in code_blocks(head) if info in ("", "bash") for line in block]
    assert lines, "README.md has no command block before its sections"
    return [line for line in lines if line and not line.startswith("#")]


def test_the_first_screen_is_what_to_type_and_what_it_prints():
    """The two set-up commands and the demo's output come first; the demo is installed one way (CI's), and no
    comment beside a command hides code of another language."""
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    firsts = {after: next(i for i, line in enumerate(lines) if line.startswith(after)) for after in ("Main job",
                                                                                                   "Tests")}
    assert all(i < FIRST_SCREEN for i in firsts.values()), firsts
    printed = next(block for start, info, block in code_blocks(text) if info == "text")
    assert printed[0].startswith("held-out sampled accuracy: ") and printed[-1].startswith("run folder: ")
    installs = [step for line in scan_block() for step in line.split("#")[0].split("&&")
                if step.strip().startswith("pip install -e")]
    assert set(step.strip() for step in installs) == {'pip install -e ".[test]"'}, installs
    comments = [line.split("#", 1)[1] for line in scan_block() if "#" in line]
    assert not [c for c in comments if re.search(r"\b(import|from \w+ import)\b", c)], comments


def test_every_command_of_the_readmes_first_block_is_one_the_cli_takes():
    import shlex
    import tomllib

    from reinforce_ada import cli

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    commands = [step.strip() for line in scan_block() for step in line.split("#")[0].split("&&")]
    assert any(c.startswith("reinforce-ada train") for c in commands)
    assert any(c.startswith("reinforce-ada compare") for c in commands)
    for command in commands:
        words = shlex.split(command)
        if words[:1] == ["reinforce-ada"]:
            cli.build_parser().parse_args(words[1:])  # an unknown option or a missing argument exits 2
        elif words[:2] == ["pip", "install"]:
            named = re.findall(r"\[([a-z,]+)\]", command)
            assert all(extra in extras for group in named for extra in group.split(",")), command
        elif words[:1] == ["bash"]:
            assert (ROOT / words[1]).is_file(), command


def test_the_demo_needs_only_the_base_dependencies(tmp_path):
    """`pip install -e .` alone runs the demo: it runs (a step, in a Python started without site-packages) with only
    the base dependencies and what they require importable -- linked into one folder -- and nothing of the extras."""
    import importlib.metadata as md
    import os
    import subprocess
    import sys
    import tomllib

    from packaging.requirements import Requirement

    def closure(names: list[str]) -> set[str]:
        seen, todo = set(), list(names)
        while todo:
            name = Requirement(todo.pop()).name.lower().replace("_", "-")
            if name in seen:
                continue
            seen.add(name)
            for requirement in md.requires(name) or []:
                marker = Requirement(requirement).marker
                if marker is None or marker.evaluate({"extra": ""}):
                    todo.append(requirement)
        return seen

    site = tmp_path / "site"
    site.mkdir()
    for name in closure(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]):
        dist = md.distribution(name)
        tops = {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}  # its modules and its metadata
        for top in tops:
            path = dist.locate_file(top)
            if os.path.exists(path) and not (site / top).exists():
                (site / top).symlink_to(path)
    code = (f"from reinforce_ada.cli import main; raise SystemExit(main(['train', '--max-steps', '1', '--eval-prompts', "
            f"'8', '--output-dir', {str(tmp_path / 'run')!r}]))")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=f"{site}{os.pathsep}{ROOT}")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "run" / "summary.json").is_file()
