"""``reinforce-ada`` command line: train, eval, simulate, simulate-multistep, plot, select-prompts, compare.

Errors: an option no subcommand has is refused (no prefix matching: ``--learning-rat`` is not ``--learning-rate``).
A :class:`~reinforce_ada.errors.UserError` (a bad setting, file, row or option), a missing optional package
(``ImportError``) or an operating-system error (a missing file, a full disk) is printed as one line
``error: <message>`` and the command exits with status 2. A run that stops because it cannot learn
(``RunStopped``) and a generator that failed for good (``GenerationError``: a server that keeps timing out, an answer
that does not fit the request) end in one line with status 3. Ctrl-C, SIGHUP and SIGTERM stop a command in one line
(status 130, 129, 143); a training run first records a ``stopped`` event and then says how it goes on (``--resume``
from its newest checkpoint, or ``--overwrite`` before the first). Any other exception is a bug and keeps its
traceback.
A usage error (an unknown option, a value of the wrong type) is one line naming the option and the value, with a
close spelling when there is one; the full usage only with ``--help``.

Every subcommand is one row of :data:`SUBCOMMANDS`, here and nowhere else: its name, help texts, and the
``add_arguments(parser)`` and ``run(args)`` functions (train, eval, simulate, plot and compare in
:mod:`reinforce_ada.commands`; select-prompts and simulate-multistep beside their research tools).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
from dataclasses import dataclass
from typing import Any, Callable

from reinforce_ada.errors import Signalled, UserError


# -- the subcommands, in the order ``--help`` lists them -----------------------------------------------------------
@dataclass(frozen=True)
class Subcommand:
    """One ``reinforce-ada NAME``: its help texts and where its options and its action live.

    ``arguments(parser)`` adds the options, ``run(args)`` does the work and returns the exit status; each is a
    function or a ``"module:function"`` string, imported when the parser is built (not when this file is).
    ``doc_description``: the description is the second paragraph of ``run``'s module docstring, shown as written.
    """

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None] | str
    run: Callable[[argparse.Namespace], int] | str
    description: str = ""
    doc_description: bool = False
    usage: str | None = None
    """The usage line, for a command with too many options to list there (argparse's own otherwise)."""


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("train", "train a model with Reinforce-Ada (no arguments: the built-in CPU demo)",
               "reinforce_ada.commands.train:add_arguments", "reinforce_ada.commands.train:run",
               description="Train with Reinforce-Ada, GRPO or DAPO. Settings come from the defaults, then --config "
                           "YAML, then the options below (each option is a TrainConfig field; its full description: "
                           "docs/settings.md). With no arguments: a tiny char-level model on 2-digit addition, on CPU.",
               usage="%(prog)s [--config YAML] [--OPTION VALUE ...]"),
    Subcommand("simulate", "compare sampling strategies on simulated prompts",
               "reinforce_ada.commands.simulate:add_arguments", "reinforce_ada.commands.simulate:run",
               description="Run GRPO, DAPO, Ada-positive and Ada-balanced through the real samplers on prompts with "
                           "hidden pass rates and Bernoulli rewards."),
    Subcommand("plot", "overlay the metrics of one or more runs",
               "reinforce_ada.commands.plot:add_arguments", "reinforce_ada.commands.plot:run",
               description="Reward and accuracy vs step and vs samples, zero-variance fraction, samples per prompt "
                           "by round."),
    Subcommand("eval", "Ave@k / pass@k of a checkpoint on one or more data sources",
               "reinforce_ada.commands.eval:add_arguments", "reinforce_ada.commands.eval:run",
               description="Sample k completions per prompt from a safetensors checkpoint, score them and print "
                           "Ave@k, pass@1 and pass@k per data source."),
    Subcommand("select-prompts", "estimate pass rates with k samples and keep a difficulty range",
               "reinforce_ada.research.select_prompts:add_arguments", "reinforce_ada.research.select_prompts:run",
               doc_description=True),
    Subcommand("simulate-multistep", "multi-step simulation: drifting pass rates, streaming, memory, latency",
               "reinforce_ada.research.simulate_multistep:add_arguments",
               "reinforce_ada.research.simulate_multistep:run",
               description="Run round-based and streaming samplers for several epochs on prompts whose pass rates "
                           "drift (logistic learning model), with a generation-latency model."),
    Subcommand("compare", "strategies side by side at equal steps, tokens and seconds, on any model and data",
               "reinforce_ada.commands.compare:add_arguments", "reinforce_ada.commands.compare:run",
               doc_description=True, usage="%(prog)s --strategies STRATEGY [STRATEGY ...] --lrs LR [LR ...] "
                                          "[--seeds SEED ...] [--out DIR] [--OPTION VALUE ...]"),
)


def _resolve(target: Callable | str) -> Callable:
    if callable(target):
        return target
    module_name, _, function = target.partition(":")
    return getattr(importlib.import_module(module_name), function)


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` without prefix matching whose usage errors are one line: the option and the value, and
    for a mistyped option or choice the closest spelling the parser knows (the top level's or the subcommand's);
    the usage only with ``--help``. ``add_subparsers`` makes every subcommand's parser one too."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    argv: list[str] = []
    """The words being parsed (set by :meth:`parse_args` on the class, so a subcommand's parser sees them too)."""

    def error(self, message: str):  # noqa: D102 -- argparse's hook; the usage is left to --help
        if message.startswith("the following arguments are required") and not any(
                not action.option_strings for action in self._actions):  # no positional a stray word could be
            second_values = [word for i, word in enumerate(_Parser.argv[2:], 2) if not word.startswith("-")
                             and not _Parser.argv[i - 1].startswith("-") and _Parser.argv[i - 2].startswith("-")]
            message += _stray_value(second_values, _Parser.argv, self)
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")  # the one prefix: as main's own errors

    def parse_args(self, args=None, namespace=None):  # noqa: D102
        _Parser.argv = sys.argv[1:] if args is None else list(args)
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # named by the parser they were given to: the subcommand's, when one was chosen
            parser = self._subcommand_parsers().get(getattr(parsed, "command", None), self)
            hint = (_closest_option(extras, parser, self)
                    or _stray_value(extras, sys.argv[1:] if args is None else list(args), parser))
            parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    def _subcommand_parsers(self) -> dict[str, "_Parser"]:
        return next((dict(a.choices) for a in self._actions if isinstance(a, argparse._SubParsersAction)), {})

    def _check_value(self, action, value):  # a choice not among the choices: name the closest one
        if action.choices is not None and value not in action.choices:
            import difflib

            choices = [str(choice) for choice in action.choices]
            close = difflib.get_close_matches(str(value), choices, n=1)
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {', '.join(choices)})"
                                                 + (f"; did you mean {close[0]!r}?" if close else ""))


def _closest_option(extras: list[str], *parsers: argparse.ArgumentParser) -> str:
    """`` (did you mean --max-steps?)`` for the first unknown option with a close spelling among ``parsers``'
    options (the subcommand's first, then the top level's); empty when none is close."""
    import difflib

    known = [option for parser in parsers for action in parser._actions for option in action.option_strings
             if action.help is not argparse.SUPPRESS or hasattr(action, "alias_of")]
    for extra in extras:
        if extra.startswith("-"):
            close = difflib.get_close_matches(extra.partition("=")[0], known, n=1)
            if close:
                return f" (did you mean {close[0]}?)"
    return ""


def _stray_value(words: list[str], argv: list[str], parser: argparse.ArgumentParser) -> str:
    """`` (--seed takes one value; did you mean --seeds?)`` for the first of ``words`` (not options) that follows an
    option taking one value and that option's value: the word was meant as its second value. The option that takes
    several values with the closest spelling is named when there is one; empty when no word is such a stray."""
    import difflib

    for stray in (word for word in words if not word.startswith("-") and word in argv):
        before = argv[:argv.index(stray)]
        option = next((word.partition("=")[0] for word in reversed(before) if word.startswith("-")), None)
        action = parser._option_string_actions.get(option) if option else None
        if action is None or action.nargs not in (None, "?") or not action.option_strings:
            continue
        several = [name for other in parser._actions if other.nargs in ("+", "*") for name in other.option_strings]
        close = difflib.get_close_matches(option, several, n=1)
        return f" ({option} takes one value" + (f"; did you mean {close[0]}?)" if close else ")")
    return ""


def _help_width() -> int:
    """The width argparse wraps help to (the terminal's, as ``shutil`` reads it, less argparse's margin)."""
    import shutil

    return shutil.get_terminal_size().columns - 2


def build_parser() -> argparse.ArgumentParser:
    import textwrap

    from reinforce_ada.config.checks import terminal_text
    from reinforce_ada.config.loading import ConfigHelpFormatter

    parser = _Parser(prog="reinforce-ada", description=terminal_text(__doc__.split("\n\n")[0]))
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="say what happens as it happens: -v the INFO log (timestamped), -vv debug; without it only "
                             "warnings, the command's own output and, on a terminal, progress bars")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in SUBCOMMANDS:
        run = _resolve(command.run)
        description = (terminal_text(sys.modules[run.__module__].__doc__.split("\n\n")[1]) if command.doc_description
                       else textwrap.fill(command.description, width=_help_width()))
        p = subparsers.add_parser(command.name, help=command.help, description=description, usage=command.usage,
                                  formatter_class=ConfigHelpFormatter)
        _resolve(command.arguments)(p)
        p.set_defaults(func=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    quiet_by_default(args.verbose)
    previous = _stop_on_signals()
    try:
        return _run(args)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _run(args: argparse.Namespace) -> int:
    """The subcommand, and every way it can fail as one line (module docstring)."""
    from reinforce_ada.sampling.protocols import GenerationError
    from reinforce_ada.training.guards import RunInterrupted, RunStopped

    from reinforce_ada.json_stdout import json_only_stdout

    try:
        with json_only_stdout(getattr(args, "json", None) is True):  # --json: stdout holds the JSON alone
            return args.func(args)
    except (UserError, ImportError) as err:
        print(f"error: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except RunStopped as err:  # a run that cannot learn: stopped early, with the cause
        print(f"error: {err}", file=sys.stderr)
        return 3
    except GenerationError as err:  # a server or engine that failed for good: after its retries, or not retriable
        print(f"error: {args.command}: generation failed: {_one_line(str(err))}", file=sys.stderr)
        return 3
    except OSError as err:
        print(f"error: {_one_line(_os_error_message(err))}", file=sys.stderr)
        return 2
    except RunInterrupted as err:  # the run said which interrupt, where, and how it goes on
        _ignore_further_interrupts()
        if args.command == "compare":  # compare continues its runs itself: its own way on, not the run's
            print(f"interrupted: reinforce-ada compare stopped ({err.cause}); {_COMPARE_GOES_ON}", file=sys.stderr)
        else:
            print(f"interrupted: reinforce-ada {args.command} stopped ({err})", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt as err:  # nothing is half-written: checkpoints and metrics lines are written whole
        _ignore_further_interrupts()
        what = err.name if isinstance(err, Signalled) else "KeyboardInterrupt"
        hint = (_COMPARE_GOES_ON if args.command == "compare" else
                "a training run continues from its newest checkpoint with --resume")
        print(f"interrupted: reinforce-ada {args.command} stopped ({what}); {hint}", file=sys.stderr)
        return getattr(err, "exit_status", 130)


def _ignore_further_interrupts() -> None:
    """An interrupted command is on its way out: a second Ctrl-C must not cut its exit short. The interpreter's exit
    handlers (torch's, the worker pools') run last-registered first, so one registered now runs before them and sets
    SIGINT ignored for the rest of the exit -- only then, so a caller of :func:`main` in the same process keeps its
    own handler until it exits."""
    import atexit
    import signal

    def ignore() -> None:
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread: nothing to set
            pass

    atexit.register(ignore)


_COMPARE_GOES_ON = ("the same command continues it: finished runs are kept, an interrupted run continues from its "
                    "checkpoint or starts over")


def _stop_on_signals() -> dict[int, Any]:
    """SIGHUP (the terminal went away) and SIGTERM raise :class:`~reinforce_ada.errors.Signalled` where the program
    is, so a command stops as on Ctrl-C (a run records its ``stopped`` event and says how it goes on) instead of
    dying without a word; returns the handlers they replace (none outside the main thread, where none can be set).

    A signal the process was started with ignored stays ignored: ``nohup reinforce-ada train ... &`` must outlive
    its terminal (as Python itself leaves an ignored SIGINT ignored)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(number: int, _frame: Any) -> None:
        raise Signalled(signal.Signals(number).name, number)

    previous = {}
    for name in ("SIGHUP", "SIGTERM"):
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is not signal.SIG_IGN:
            previous[number] = signal.signal(number, stop)
    return previous


def quiet_by_default(verbose: int) -> None:
    """The command line's output: warnings and the command's own lines; with ``-v`` the INFO log (``-vv`` debug),
    timestamped. Third-party progress bars (transformers' "Loading weights", the hub's and datasets' downloads) stay
    off -- their libraries read these variables when they are first imported, which is after this -- and ours show on
    a terminal only, so a piped log holds no carriage-return redraws."""
    import os

    for variable in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        os.environ.setdefault(variable, "1")
    if verbose:
        logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
        # vLLM configures its own loggers when imported (later): its INFO lines -- two per weight sync -- only with -v
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if verbose < 2:  # one INFO line per HTTP request (select-prompts --base-url) says nothing new
        logging.getLogger("httpx").setLevel(logging.WARNING)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _os_error_message(err: OSError) -> str:
    """``strerror: file`` when the OS named the file, else the message as raised (it usually names it)."""
    if err.filename is not None and err.strerror:
        return f"{err.strerror}: {err.filename}"
    return str(err)


if __name__ == "__main__":
    sys.exit(main())
