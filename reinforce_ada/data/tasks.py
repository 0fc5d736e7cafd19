"""Built-in tasks: named prompt sources that know which verifier scores them.

A :class:`Task` has a ``name``, a ``verifier_name`` (the verifier to use by default, see
:func:`reinforce_ada.verifiers.get_verifier`) and ``prompts(num, seed, split)``. Tasks are registered by name;
``get_task(name, **options)`` builds one.

``arithmetic``: generated ``a<op>b=`` problems (``"12+34="`` -> answer ``"46"``), short enough for the tiny
character-level model. Operands are uniform in ``[0, 10**digits)``; ``operators`` is any of ``"+-*"``. Every
expression belongs to exactly one split by a hash of its text (``test_fraction`` of them, default 10%, are ``test``),
so train and test never overlap; ``prompts(num, seed, split)`` draws ``num`` distinct expressions of that split with
a seeded generator (same seed -> same prompts, in the same order). Scored by the ``arithmetic`` verifier. The prompt
id is the expression itself.

``arithmetic-mixed``: the harder built-in task, with a realistic spread of difficulty. Each operand first draws its
length uniformly from 1 to ``max_digits`` (default 2) digits, then its value uniformly among numbers of that length;
the operator is uniform over ``operators`` (default ``"+-*"``). ``3+4=`` is easy for the tiny model, ``87*46=``
hopeless, so per-prompt pass rates range from 0 to 1 and, as on a real model's hard math prompts, most GRPO groups
of 4 have no signal (measured in docs/benchmarks.md). With ``max_digits=3`` the tiny model's warm start stays near
8% accuracy (88% of GRPO groups without signal): too hard to learn from on a CPU, hence the default of 2. Same
split rule, verifier and prompt ids as ``arithmetic``.

``arithmetic-chat``: arithmetic worded for a pretrained chat model (``"What is 37 + 5? Reply with just the
number."``), one-digit ``+``, ``-``, ``*`` and two-digit plus one-digit problems, the family drawn first; a finite set
(1,200 expressions, a quarter of them held out by the same hash rule), scored by ``last-integer`` (the last number of
the completion). SmolLM2-135M-Instruct's first task (docs/smollm2.md).

``reasoning-gym:<dataset>``: prompts from a `reasoning-gym <https://github.com/open-thought/reasoning-gym>`_
procedural dataset (optional dependency; generation and scoring are offline), scored by the ``reasoning-gym``
verifier with the dataset's own ``score_answer``. Options other than ``system_prompt`` / ``template`` go to the
dataset's config (e.g. ``min_terms=2``). The same hash split as above keeps train and test questions apart: items
are generated from ``seed`` and kept only when their question hashes into the requested split. The prompt id is
``"<dataset>:<hash of question>"`` and the entry travels in ``Prompt.metadata["reasoning_gym"]``.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from typing import Any, Callable

import numpy as np

from reinforce_ada.core.registry import Registry
from reinforce_ada.data.loading import apply_template
from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt

SPLITS = ("train", "test")

TASKS: Registry[Callable[..., "Task"]] = Registry("task")
"""Name -> factory; ``factory(**options)`` returns a :class:`Task`."""

register_task = TASKS.register


def split_of(text: str, test_fraction: float) -> str:
    """``"test"`` for about ``test_fraction`` of all texts (by a SHA-256 hash of ``text``), else ``"train"``."""
    bucket = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") / 2.0 ** 64
    return "test" if bucket < test_fraction else "train"


def _check_request(num: int, split: str) -> None:
    if not isinstance(num, (int, np.integer)) or num < 1:
        raise ValueError(f"num must be a positive integer (got {num!r})")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")


class Task(ABC):
    """A named source of prompts plus the verifier that scores them."""

    name: str
    verifier_name: str
    verifier_options: dict[str, Any]

    @abstractmethod
    def prompts(self, num: int, seed: int, split: str = "train") -> list[Prompt]:
        """``num`` distinct prompts of ``split`` (``"train"`` or ``"test"``), the same for the same ``seed``."""

    def pool_size(self, split: str) -> int | None:
        """The most prompts of ``split`` a default training pool takes (``None``: as many as asked for): a task with a
        small split, or with parts of unequal size, says how many it can draw before its mix of prompts changes."""
        return None

    def verifier(self, **options: Any):
        """The task's default verifier (``options`` override the task's own verifier options)."""
        from reinforce_ada.verifiers import get_verifier

        return get_verifier(self.verifier_name, **{**self.verifier_options, **options})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, verifier_name={self.verifier_name!r})"


@register_task("arithmetic")
class ArithmeticTask(Task):
    """``a<op>b=`` with ``digits``-digit operands; answer is the integer result.

    >>> task = ArithmeticTask(digits=2)
    >>> [(p.prompt, p.answer) for p in task.prompts(2, seed=0)]
    [('85+63=', '148'), ('51+26=', '77')]
    """

    def __init__(self, *, digits: int = 2, operators: str = "+", test_fraction: float = 0.1):
        if not isinstance(digits, int) or not 1 <= digits <= 9:
            raise ValueError(f"digits must be an integer in [1, 9] (got {digits!r})")
        if not operators or set(operators) - set("+-*"):
            raise ValueError(f"operators must be a non-empty string of '+', '-', '*' (got {operators!r})")
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1) (got {test_fraction})")
        self.name = "arithmetic"
        self.verifier_name = "arithmetic"
        self.verifier_options = {}
        self.digits = digits
        self.operators = "".join(dict.fromkeys(operators))
        self.test_fraction = test_fraction

    @property
    def num_expressions(self) -> int:
        """All distinct expressions, both splits together."""
        return (10 ** self.digits) ** 2 * len(self.operators)

    def _expression(self, a: int, op: str, b: int) -> tuple[str, str]:
        result = a + b if op == "+" else a - b if op == "-" else a * b
        return f"{a}{op}{b}=", str(result)

    def prompts(self, num: int, seed: int, split: str = "train") -> list[Prompt]:
        _check_request(num, split)
        share = self.test_fraction if split == "test" else 1.0 - self.test_fraction
        rng = np.random.default_rng([seed, SPLITS.index(split)])
        high = 10 ** self.digits
        if num > share * self.num_expressions / 4:  # dense request: enumerate the whole split, then shuffle
            every = [(a, op, b) for a in range(high) for op in self.operators for b in range(high)
                     if split_of(self._expression(a, op, b)[0], self.test_fraction) == split]
            if num > len(every):
                raise ValueError(f"asked for {num} {split} prompts but arithmetic with digits={self.digits} and "
                                 f"operators={self.operators!r} has only {len(every)}")
            picks = [every[i] for i in rng.permutation(len(every))[:num]]
        else:  # sparse request: draw until enough distinct expressions of this split
            seen: set[tuple[int, str, int]] = set()
            picks = []
            while len(picks) < num:
                a, b = rng.integers(0, high, size=2).tolist()
                op = self.operators[int(rng.integers(len(self.operators)))]
                if (a, op, b) in seen or split_of(self._expression(a, op, b)[0], self.test_fraction) != split:
                    continue
                seen.add((a, op, b))
                picks.append((a, op, b))
        prompts = []
        for a, op, b in picks:
            text, answer = self._expression(a, op, b)
            prompts.append(Prompt(prompt_id=text, prompt=text, answer=answer,
                                  metadata={"task": self.name, "a": a, "b": b, "operator": op}))
        return prompts


@register_task("arithmetic-mixed")
class MixedArithmeticTask(ArithmeticTask):
    """``a<op>b=`` with operands of mixed length (1 to ``max_digits`` digits, the length drawn first).

    >>> task = MixedArithmeticTask()
    >>> [(p.prompt, p.answer) for p in task.prompts(3, seed=0)]
    [('50*3=', '150'), ('64+9=', '73'), ('1-1=', '0')]
    """

    def __init__(self, *, max_digits: int = 2, operators: str = "+-*", test_fraction: float = 0.1):
        super().__init__(digits=max_digits, operators=operators, test_fraction=test_fraction)
        self.name = "arithmetic-mixed"
        self.max_digits = max_digits

    def _operand(self, rng: np.random.Generator) -> int:
        length = int(rng.integers(1, self.max_digits + 1))
        low = 0 if length == 1 else 10 ** (length - 1)
        return int(rng.integers(low, 10 ** length))

    def prompts(self, num: int, seed: int, split: str = "train") -> list[Prompt]:
        _check_request(num, split)
        share = self.test_fraction if split == "test" else 1.0 - self.test_fraction
        if num > share * self.num_expressions / 4:
            raise ValueError(f"asked for {num} {split} prompts; arithmetic-mixed with max_digits={self.max_digits} "
                             f"has about {int(share * self.num_expressions)}: ask for at most a quarter of them")
        rng = np.random.default_rng([seed, SPLITS.index(split), 1])
        seen: set[str] = set()
        prompts = []
        while len(prompts) < num:
            a, b = self._operand(rng), self._operand(rng)
            op = self.operators[int(rng.integers(len(self.operators)))]
            text, answer = self._expression(a, op, b)
            if text in seen or split_of(text, self.test_fraction) != split:
                continue
            seen.add(text)
            prompts.append(Prompt(prompt_id=text, prompt=text, answer=answer,
                                  metadata={"task": self.name, "a": a, "b": b, "operator": op}))
        return prompts


CHAT_FAMILIES = ("1+1", "1-1", "1*1", "2+1")
"""``arithmetic-chat``'s default families: one-digit ``+``, ``-`` and ``*``, and a two-digit plus a one-digit number."""

CHAT_TEMPLATE = "What is {a} {op} {b}? Reply with just the number."


@register_task("arithmetic-chat")
class ChatArithmeticTask(Task):
    """Arithmetic worded for a pretrained chat model: ``"What is 37 + 5? Reply with just the number."`` -> ``"42"``.

    Each prompt first draws its *family* uniformly from ``families`` -- ``"<digits of a><op><digits of b>"``, e.g.
    ``"1*1"`` (one-digit times one-digit) or ``"2+1"`` (a two-digit number plus a one-digit one) -- then its operands
    uniformly among numbers of those lengths (one digit: 0-9; two digits: 10-99). The families spread the difficulty
    for a small model: SmolLM2-135M-Instruct answers one-digit sums about 1 time in 6 with 8 new tokens and two-digit
    sums about 1 in 50 (docs/smollm2.md gives the histogram). Every expression belongs to exactly one split by a hash
    of its prompt text (``test_fraction`` of them, default 25%, are ``test``), so train and test never overlap and the
    split is the same everywhere; ``prompts(num, seed, split)`` draws ``num`` distinct prompts of that split with a
    seeded generator. Scored by the ``last-integer`` verifier (the last number of the completion). The prompt id is
    the expression, ``"37+5"``; the family travels in ``Prompt.metadata["family"]``.

    >>> task = ChatArithmeticTask()
    >>> [(p.prompt_id, p.answer) for p in task.prompts(4, seed=0)]
    [('10+8', '18'), ('0+0', '0'), ('4*2', '8'), ('7+8', '15')]
    >>> task.prompts(1, seed=0)[0].prompt
    'What is 10 + 8? Reply with just the number.'
    """

    def __init__(self, *, families: str | tuple[str, ...] = CHAT_FAMILIES, test_fraction: float = 0.25):
        names = tuple(families.replace(",", " ").split()) if isinstance(families, str) else tuple(families)
        if not names or len(set(names)) != len(names):
            raise ValueError(f"families must name at least one family, each once (got {families!r})")
        self.families: dict[str, tuple[int, str, int]] = {}
        for name in names:
            if len(name) != 3 or name[0] not in "12" or name[1] not in "+-*" or name[2] not in "12":
                raise ValueError(f"family {name!r} is not '<1|2><+|-|*><1|2>' (e.g. '2+1': a two-digit number "
                                 f"plus a one-digit one)")
            self.families[name] = (int(name[0]), name[1], int(name[2]))
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1) (got {test_fraction})")
        self.name = "arithmetic-chat"
        self.verifier_name = "last-integer"
        self.verifier_options = {}
        self.test_fraction = test_fraction

    @staticmethod
    def _operands(digits: int) -> range:
        return range(10) if digits == 1 else range(10 ** (digits - 1), 10 ** digits)

    def _prompt(self, family: str, a: int, b: int) -> Prompt:
        op = self.families[family][1]
        answer = a + b if op == "+" else a - b if op == "-" else a * b
        return Prompt(prompt_id=f"{a}{op}{b}", prompt=CHAT_TEMPLATE.format(a=a, op=op, b=b), answer=str(answer),
                      metadata={"task": self.name, "family": family, "a": a, "b": b, "operator": op})

    def members(self, split: str) -> dict[str, list[tuple[int, int]]]:
        """Every family's operand pairs ``(a, b)`` whose prompt falls in ``split``, in increasing order."""
        return {name: [(a, b) for a in self._operands(da) for b in self._operands(db)
                       if split_of(CHAT_TEMPLATE.format(a=a, op=op, b=b), self.test_fraction) == split]
                for name, (da, op, db) in self.families.items()}

    def pool_size(self, split: str) -> int:
        """Every family's share while all of them last: ``len(families) x`` the smallest family's size in
        ``split`` (train: 4 x 70 = 280 of its 913 prompts, about a quarter from each family; beyond, the draw holds
        two-digit sums only, 683 of the 913)."""
        members = self.members(split)
        return len(members) * min(len(pairs) for pairs in members.values())

    def prompts(self, num: int, seed: int, split: str = "train") -> list[Prompt]:
        _check_request(num, split)
        members = self.members(split)
        total = sum(len(pairs) for pairs in members.values())
        if num > total:
            raise ValueError(f"asked for {num} {split} prompts; arithmetic-chat's {split} split has {total} "
                             f"({', '.join(f'{name}: {len(pairs)}' for name, pairs in members.items())})")
        rng = np.random.default_rng([seed, SPLITS.index(split), 2])
        # each family's pairs in a seeded order; a family, drawn uniformly among those with pairs left, gives its next
        queues = {name: [pairs[i] for i in rng.permutation(len(pairs))] for name, pairs in members.items()}
        prompts: list[Prompt] = []
        while len(prompts) < num:
            left = [name for name, queue in queues.items() if queue]
            family = left[int(rng.integers(len(left)))]
            prompts.append(self._prompt(family, *queues[family].pop()))
        return prompts


class ReasoningGymTask(Task):
    """Prompts from the reasoning-gym procedural dataset ``dataset``, scored by its own ``score_answer``."""

    def __init__(self, dataset: str, *, system_prompt: str | None = None, template: str | None = None,
                 test_fraction: float = 0.1, extract: str = "answer_tag", **config: Any):
        from reinforce_ada.verifiers.reasoning_gym import require_reasoning_gym

        require_reasoning_gym()
        import reasoning_gym
        from reasoning_gym.factory import DATASETS

        if dataset not in DATASETS:
            raise ConfigError(f"unknown reasoning-gym dataset {dataset!r}; e.g. {', '.join(sorted(DATASETS)[:8])}, ...")
        if template is not None and "{prompt}" not in template:
            raise ValueError(f"template must contain '{{prompt}}' (got {template!r})")
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1) (got {test_fraction})")
        reasoning_gym.create_dataset(dataset, size=1, seed=0, **config)  # bad config options fail here, early
        self.name = f"reasoning-gym:{dataset}"
        self.verifier_name = "reasoning-gym"
        self.verifier_options = {"extract": extract}
        self.dataset = dataset
        self.config = config
        self.system_prompt = system_prompt
        self.template = template
        self.test_fraction = test_fraction

    def prompts(self, num: int, seed: int, split: str = "train") -> list[Prompt]:
        import reasoning_gym

        _check_request(num, split)
        share = self.test_fraction if split == "test" else 1.0 - self.test_fraction
        chosen: dict[str, Prompt] = {}
        for chunk in range(100):
            size = max(16, int(2 * (num - len(chosen)) / share))
            data = reasoning_gym.create_dataset(self.dataset, size=size, seed=seed * 1_000_003 + chunk, **self.config)
            for entry in data:
                question = entry["question"]
                if split_of(question, self.test_fraction) != split:
                    continue
                prompt_id = f"{self.dataset}:{hashlib.sha256(question.encode('utf-8')).hexdigest()[:16]}"
                if prompt_id in chosen:
                    continue
                text = apply_template(question, self.template)
                prompt: str | list[dict] = text if self.system_prompt is None else [
                    {"role": "system", "content": self.system_prompt}, {"role": "user", "content": text}]
                chosen[prompt_id] = Prompt(prompt_id=prompt_id, prompt=prompt, answer=entry["answer"], metadata={
                    "reasoning_gym": {"dataset": self.dataset, "entry": entry}})
                if len(chosen) == num:
                    return list(chosen.values())
        raise ValueError(f"reasoning-gym {self.dataset!r} produced only {len(chosen)} distinct {split} questions; "
                         f"ask for fewer than {num}")


def get_task(name: str, **options: Any) -> Task:
    """Build the task registered as ``name`` (``"arithmetic"``) or ``"reasoning-gym:<dataset>"`` with ``options``."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"task name must be a non-empty string (got {name!r})")
    if name.startswith("reasoning-gym:"):
        dataset = name.partition(":")[2]
        if not dataset:
            raise ConfigError("give the dataset after the colon, e.g. 'reasoning-gym:basic_arithmetic'")
        return ReasoningGymTask(dataset, **options)
    if name in TASKS:
        return TASKS.get(name)(**options)
    raise ConfigError(f"unknown task {name!r}; registered: {', '.join(TASKS.names())}, or 'reasoning-gym:<dataset>'")


def list_tasks() -> list[str]:
    """The registered task names (``reasoning-gym:<dataset>`` is accepted as well)."""
    return TASKS.names()


def task_names_text() -> str:
    """Every built-in task as ``--help`` lists it: ``arithmetic, arithmetic-mixed, reasoning-gym:<dataset>``."""
    return ", ".join([*TASKS.names(), "reasoning-gym:<dataset>"])


def bare_task_name(source: str) -> str | None:
    """``source`` when it names a built-in task (``arithmetic``, ``reasoning-gym:<dataset>``) and no file or folder of
    that name exists -- a task given where a data source goes, to be spelled ``task:NAME``; else ``None``."""
    from pathlib import Path

    if not isinstance(source, str) or Path(source).expanduser().exists():
        return None
    return source if source in TASKS or source.startswith("reasoning-gym:") else None
