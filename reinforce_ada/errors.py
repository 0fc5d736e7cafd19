"""The errors that mean "what you gave is wrong", as opposed to a bug or a failing machine.

Every one of them carries a message that names the culprit (the config field, the file and row, the option) and
says what was expected. The command line prints such an error as one line, ``error: <message>``, and exits with
status 2, before any model is loaded where it can; any other exception is a bug and keeps its traceback.

Each class also derives from the built-in exception code written before it existed would catch (``ValueError``,
``KeyError``, ``TypeError``), so ``except ValueError`` still works. :class:`VerifierError` (a reward function's result
that cannot be read) is here too, below every layer that raises or counts it.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user gave (a setting, a file, an option) is wrong; the message names it."""


class ConfigError(UserError, ValueError):
    """A configuration value is invalid; the message names the field."""


class UsageError(UserError, ValueError):
    """A command-line argument is invalid; the message names the option."""


class DataError(UserError, ValueError):
    """A data file or dataset cannot be used as given; the message names the file (and row or line)."""


class DataKeyError(DataError, KeyError):
    """Something named in the data is not there (a column, a split)."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class MissingColumnError(DataKeyError):
    """A column named by ``prompt_key`` / ``answer_key`` / ``id_key`` is not in the data."""


class BadRowError(DataError, TypeError):
    """A row holds a value of the wrong kind (e.g. a prompt that is neither text nor chat messages)."""


class RunFolderError(UserError, ValueError):
    """The run folder cannot be used as asked (it holds a run, or a resume would mix two runs)."""


class CheckpointError(UserError, ValueError):
    """A checkpoint is missing, corrupt or inconsistent; the message names the file."""


class NoDeviceError(ConfigError, RuntimeError):
    """``device`` names a GPU that torch cannot see."""


class VerifierError(ValueError):
    """The verifier returned something unusable (wrong length, NaN or infinite reward). Not a :class:`UserError`:
    the samplers count it as a failed verification (``on_verifier_failure``), and the run's guards stop a run whose
    verifier fails on (almost) everything (exit 3). Also importable from :mod:`reinforce_ada.sampling.protocols`."""


class Signalled(KeyboardInterrupt):
    """A signal that asks the process to stop (SIGHUP: its terminal went away; SIGTERM), raised where the program is,
    as Ctrl-C raises :class:`KeyboardInterrupt`, so a run stops the same way: its ``stopped`` event recorded, one
    line said. ``exit_status`` is the shell's for that signal (128 + its number)."""

    def __init__(self, name: str, number: int):
        super().__init__(name)
        self.name, self.exit_status = name, 128 + number
