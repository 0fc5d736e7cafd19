"""Every ``reinforce-ada`` subcommand is registered in one place: the table in ``reinforce_ada/cli.py``."""

import pathlib
import re

import reinforce_ada
from reinforce_ada import cli

PACKAGE = pathlib.Path(reinforce_ada.__file__).parent


def test_the_table_is_what_the_parser_offers():
    parser = cli.build_parser()
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    assert list(subparsers.choices) == [c.name for c in cli.SUBCOMMANDS]
    assert [c.name for c in cli.SUBCOMMANDS] == ["train", "simulate", "plot", "eval", "select-prompts",
                                                 "simulate-multistep", "compare"]
    for command in cli.SUBCOMMANDS:
        args = subparsers.choices[command.name].parse_args(_minimal_argv(command.name))
        assert args.func is cli._resolve(command.run)


def _minimal_argv(name):
    return {"plot": ["run"], "eval": ["--model", "m", "--data", "d"],
            "select-prompts": ["--data", "d", "--tiny", "--out", "o"],
            "compare": ["--strategies", "grpo", "ada-balanced", "--lrs", "1e-3"]}.get(name, [])


def test_no_other_module_registers_a_subcommand():
    registering = [path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
                   if re.search(r"\.add_(sub)?parsers?\(", path.read_text())]
    assert registering == ["cli.py"]


def test_help_and_one_line_config_errors_load_no_torch(tmp_path):
    """``--help``, ``train --help`` and a config error answer without importing torch or transformers (their
    start-up time is measured in benchmarks/cli_startup.py)."""
    import json
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text("sampler:\n  exit_rul: positive\n")
    probe = ("import json, sys\nfrom reinforce_ada.cli import main\ntry:\n    code = main({argv!r})\n"
             "except SystemExit as exit_:\n    code = exit_.code\n"
             "print(json.dumps([code, 'torch' in sys.modules, 'transformers' in sys.modules]), file=sys.stderr)")
    for argv, expected in ((["--help"], 0), (["train", "--help"], 0), (["eval", "--help"], 0),
                           (["train", "--max-steps", "0"], 2), (["train", "--config", str(bad)], 2)):
        done = subprocess.run([sys.executable, "-c", probe.format(argv=argv)], capture_output=True, text=True)
        code, torch_loaded, transformers_loaded = json.loads(done.stderr.strip().splitlines()[-1])
        assert (code, torch_loaded, transformers_loaded) == (expected, False, False), (argv, done.stderr[-500:])
