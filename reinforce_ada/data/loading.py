"""Load training prompts from a file or a Hugging Face dataset into :class:`~reinforce_ada.types.Prompt` objects.

``load_prompts(source, ...)``:

1. Read rows. ``.jsonl`` / ``.json`` / ``.parquet`` / ``.csv`` files are read directly (``.json`` may hold a list
   of records, a ``{"column": [...]}`` mapping or ``{"data": [...]}``; ``.parquet`` needs ``pyarrow``). A directory
   written by ``datasets``' ``save_to_disk`` is opened with ``load_from_disk``; any other directory or a dataset name
   goes to ``datasets.load_dataset`` (offline under ``HF_HUB_OFFLINE=1``: only the local cache is used). ``split``
   picks the split of a dataset dictionary; it is ignored for single files.
2. Check before any work per row: the source exists, the extension is supported, a file is UTF-8 (a UTF-8 BOM is
   allowed; otherwise the error gives the line and byte offset of the first bad byte), the dataset is not empty,
   the ``prompt_key`` / ``answer_key`` / ``id_key`` columns exist (the error lists the available columns) and, with
   ``answer_key``, every row has an answer (``None``, a missing value, NaN or blank text is refused, naming the
   rows). Each of these is a :class:`~reinforce_ada.errors.DataError` naming the file.
3. Build each prompt. A string in ``prompt_key`` is put into ``template`` (every ``{prompt}`` is replaced; other
   braces, such as ``\\boxed{}``, are kept as written); with ``system_prompt`` it becomes the chat messages
   ``[{"role": "system", ...}, {"role": "user", ...}]``. A column that already holds a message list stays a message
   list (the template applies to its last user message; ``system_prompt`` is prepended unless it has one).
   ``answer_key`` gives ``Prompt.answer`` (``answer_key=None`` for none); every other column goes to
   ``Prompt.metadata``.
4. Ids. With ``id_key`` the id is that column's value (it must be unique). Otherwise it is a content hash: the first
   16 hex digits of SHA-256 over the JSON of the raw prompt and answer, so the id does not change when rows are
   reordered, filtered or templated differently; identical rows get ``#1``, ``#2``, ... appended in row order.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import re
from pathlib import Path
import math
from typing import Any, Callable, Iterable

from reinforce_ada.errors import BadRowError, ConfigError, DataError, DataKeyError, MissingColumnError
from reinforce_ada.types import Prompt

logger = logging.getLogger(__name__)

SUPPORTED_EXTENSIONS = (".jsonl", ".json", ".parquet", ".csv")


def load_prompts(source: str | Path, *, prompt_key: str = "prompt", answer_key: str | None = "answer",
                 template: str | None = None, system_prompt: str | None = None, split: str = "train",
                 limit: int | None = None, id_key: str | None = None) -> list[Prompt]:
    """Read prompts from ``source`` (a data file, a ``save_to_disk`` directory or a dataset name); see the module doc.

    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "train.jsonl"
    >>> _ = path.write_text(json.dumps({"question": "1+1?", "answer": "2", "level": 1}) + "\\n")
    >>> [prompt] = load_prompts(path, prompt_key="question", template="{prompt} Answer in \\\\boxed{}.")
    >>> prompt.prompt, prompt.answer, prompt.metadata
    ('1+1? Answer in \\\\boxed{}.', '2', {'level': 1})
    """
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a positive integer or None (got {limit!r})")
    if template is not None and "{prompt}" not in template:
        raise ConfigError(f"template must contain '{{prompt}}' where the prompt goes (got {template!r})")
    rows, columns, where = _read_rows(source, split)
    if not rows:
        raise DataError(f"{source}: the dataset is empty (no rows)")
    check_columns(source, columns, prompt_key=prompt_key, answer_key=answer_key, id_key=id_key)
    if limit is not None:
        rows = rows[:limit]
    if answer_key is not None:
        check_answers(source, rows, answer_key, where)
    prompts: list[Prompt] = []
    seen: dict[Any, int] = {}
    used = {prompt_key, answer_key, id_key}
    for index, row in enumerate(rows):
        raw = row.get(prompt_key)
        text = _build_prompt(raw, template, system_prompt, where=f"{source} row {index}")
        answer = row.get(answer_key) if answer_key is not None else None
        if id_key is not None:
            prompt_id = row[id_key]
            if prompt_id in seen:
                raise DataError(f"{source}: id {prompt_id!r} in column {id_key!r} appears in rows {seen[prompt_id]} "
                                f"and {index}; ids must be unique")
            seen[prompt_id] = index
        else:
            prompt_id = content_id(raw, answer)
            count = seen.get(prompt_id, 0)
            seen[prompt_id] = count + 1
            if count:
                prompt_id = f"{prompt_id}#{count}"
        metadata = {key: value for key, value in row.items() if key not in used}
        prompts.append(Prompt(prompt_id=prompt_id, prompt=text, answer=answer, metadata=metadata))
    logger.info("loaded %d prompts from %s", len(prompts), source)
    return prompts


def check_columns(source: Any, columns: Iterable[str], **keys: str | None) -> None:
    """Raise :class:`MissingColumnError` naming the source, the missing column, the option that named it and the
    columns there are (``keys``: option name -> column, e.g. ``prompt_key="question"``; ``None`` is skipped)."""
    columns = list(columns)
    for role, key in keys.items():
        if key is not None and key not in columns:
            raise MissingColumnError(f"{source}: no column {key!r} (given as {role}); available columns: "
                                     f"{', '.join(map(repr, columns))}")


def has_answer(value: Any) -> bool:
    """False for a missing reference answer: ``None``, NaN or text that is empty after stripping."""
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return not (isinstance(value, str) and not value.strip())


def check_answers(source: Any, rows: list[dict], answer_key: str, where: Any = None) -> None:
    """Raise :class:`DataError` when a row has no answer in ``answer_key``, naming up to five of them (a verifier
    could only fail on them, which would look like a run of wrong answers). ``where(index)`` names a row (default
    ``row <index>``, counted from 0 as in the other messages of this module)."""
    where = where or (lambda index: f"row {index}")
    missing = [index for index, row in enumerate(rows) if not has_answer(row.get(answer_key))]
    if missing:
        shown = ", ".join(where(i) for i in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise DataError(f"{source}: {len(missing)} of {len(rows)} rows have no answer in column {answer_key!r} "
                        f"({shown}); give every row a reference answer or remove those rows")


def read_utf8_text(path: str | Path, *, error: type[Exception] = DataError, what: str = "file") -> str:
    """The text of a UTF-8 file (a leading BOM is dropped). A missing file or bytes that are not UTF-8 raise
    ``error`` naming the file, and the line and byte offset of the first bad byte."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{what} {path} does not exist" if not path.exists() else f"{what} {path} is not a file")
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise error(f"{path}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x} at byte offset {err.start}); "
                    f"save the file as UTF-8") from None


def content_id(prompt: Any, answer: Any) -> str:
    """First 16 hex digits of SHA-256 over the JSON of ``[prompt, answer]`` (stable across runs and machines)."""
    payload = json.dumps([prompt, answer], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def apply_template(text: str, template: str | None) -> str:
    """Replace every ``{prompt}`` in ``template`` with ``text``; other braces stay as written."""
    return text if template is None else template.replace("{prompt}", text)


def _build_prompt(raw: Any, template: str | None, system_prompt: str | None, where: str) -> str | list[dict]:
    if isinstance(raw, str):
        if not raw.strip():
            raise DataError(f"{where}: the prompt is empty or whitespace only")
        text = apply_template(raw, template)
        if system_prompt is None:
            return text
        return [{"role": "system", "content": system_prompt}, {"role": "user", "content": text}]
    if _is_messages(raw):
        messages = [dict(m) for m in raw]
        if template is not None:
            users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
            if not users:
                raise DataError(f"{where}: template given but the message list has no user message")
            messages[users[-1]]["content"] = apply_template(messages[users[-1]]["content"], template)
        if system_prompt is not None and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": system_prompt})
        return messages
    raise BadRowError(f"{where}: the prompt must be a string or a list of {{'role', 'content'}} messages "
                      f"(got {type(raw).__name__})")


def _is_messages(value: Any) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) > 0
            and all(isinstance(m, dict) and "role" in m and "content" in m for m in value))


Where = Callable[[int], str]
"""Names a row by its index in messages: ``row 3``, or ``row 3 (line 5)`` for line-based files."""


def _read_rows(source: str | Path, split: str) -> tuple[list[dict], list[str], Where]:
    path = Path(source)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix not in SUPPORTED_EXTENSIONS:
            raise DataError(f"{path}: unsupported file type {suffix or '(none)'!r}; supported: "
                            f"{', '.join(SUPPORTED_EXTENSIONS)}, or a datasets directory / name")
        if suffix == ".parquet":
            rows, lines = _read_parquet(path), None
        else:
            reader = {".jsonl": read_jsonl, ".json": _read_json, ".csv": _read_csv}[suffix]
            rows, lines = reader(path, read_utf8_text(path))
        return rows, _columns(rows), _where(lines)
    if path.is_dir():
        rows, columns = _read_hf(path, split, on_disk=_is_saved_dataset(path))
        return rows, columns, _where(None)
    looks_like_path = isinstance(source, Path) or str(source).startswith((".", "/", "~")) or Path(
        str(source)).suffix.lower() in SUPPORTED_EXTENSIONS
    if looks_like_path:
        raise FileNotFoundError(f"no such file or directory: {source}")
    rows, columns = _read_hf(str(source), split, on_disk=False)
    return rows, columns, _where(None)


def _where(lines: list[int] | None) -> Where:
    if lines is None:
        return lambda index: f"row {index}"
    return lambda index: f"row {index} (line {lines[index]})"


def _columns(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


def read_jsonl(path: str | Path, text: str | None = None) -> tuple[list[dict], list[int]]:
    """The JSON objects of a JSONL file (``text``: its contents, if already read) and the line number of each; a line
    that is not a JSON object is a :class:`DataError` naming the file and line. Blank lines are skipped."""
    path = Path(path)
    text = read_utf8_text(path) if text is None else text
    rows, lines = [], []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{number}: not valid JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{number}: each line must be a JSON object (got {type(row).__name__})")
        if _SURROGATE_ESCAPE.search(line):
            check_unicode(row, f"{path}:{number}")
        rows.append(row)
        lines.append(number)
    return rows, lines


def _read_json(path: Path, text: str) -> tuple[list[dict], None]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if isinstance(data, dict) and data and all(isinstance(v, list) for v in data.values()):
        lengths = {len(v) for v in data.values()}
        if len(lengths) != 1:
            raise DataError(f"{path}: columns have different lengths {sorted(lengths)}")
        data = [dict(zip(data, values)) for values in zip(*data.values())]
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise DataError(f"{path}: expected a list of objects, {{'column': [...]}} or {{'data': [...]}}")
    if _SURROGATE_ESCAPE.search(text):
        for index, row in enumerate(data):
            check_unicode(row, f"{path}: row {index}")
    return data, None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A JSON escape of a UTF-16 surrogate: the only way a UTF-8 file can hold one (a pair is fine, one alone is not)."""


def check_unicode(value: Any, where: str, field: str = "") -> None:
    """Raise :class:`DataError` naming ``where`` and the field when a string in ``value`` (a row, a list, a string)
    holds a lone surrogate (``"\\ud800"`` in JSON): not Unicode text, so no tokenizer, hash or file can take it."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise DataError(f"{where}: {field or 'a value'} holds a lone surrogate ({value[err.start]!r} at "
                            f"character {err.start}), which is not Unicode text; fix the \\u escape or drop the "
                            f"row") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            check_unicode(item, where, field or f"field {key!r}")
    elif isinstance(value, (list, tuple)):
        for item in value:
            check_unicode(item, where, field)


def _read_csv(path: Path, text: str) -> tuple[list[dict], list[int]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows, lines = [], []
    for row in reader:
        rows.append(dict(row))
        lines.append(reader.line_num)
    return rows, lines


def _read_parquet(path: Path) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("reading .parquet needs pyarrow: pip install pyarrow (it comes with 'datasets')") from None
    return pq.read_table(path).to_pylist()


def _is_saved_dataset(path: Path) -> bool:
    return (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()


def _read_hf(source: str | Path, split: str, on_disk: bool) -> tuple[list[dict], list[str]]:
    try:
        import datasets
    except ImportError:
        raise ImportError(f"loading {source!r} needs the datasets package: pip install 'reinforce-ada[train]'") from None
    try:
        data = datasets.load_from_disk(str(source)) if on_disk else datasets.load_dataset(str(source))
    except FileNotFoundError as err:
        raise FileNotFoundError(f"cannot load dataset {str(source)!r}: {err}") from err
    except (ConnectionError, OSError, ValueError) as err:
        raise DataError(f"cannot load dataset {str(source)!r} (offline? HF_HUB_OFFLINE=1 allows only the local "
                        f"cache): {err}") from err
    if isinstance(data, (datasets.DatasetDict, dict)):
        if split not in data:
            raise DataKeyError(f"{source}: no split {split!r}; available splits: {', '.join(map(repr, data))}")
        data = data[split]
    return _rows_of(data), list(data.column_names)


def _rows_of(dataset: Iterable[dict]) -> list[dict]:
    return [dict(row) for row in dataset]
