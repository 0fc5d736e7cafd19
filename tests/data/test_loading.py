"""load_prompts on small files and datasets the tests write themselves (nothing is downloaded)."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.data import content_id, load_prompts

ROWS = [
    {"question": "What is 1+1?", "solution": "2", "level": 1},
    {"question": "What is 2+3?", "solution": "5", "level": 2},
    {"question": "What is 1+1?", "solution": "2", "level": 3},  # same content as row 0
]


@pytest.fixture()
def jsonl(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    return path


def _write_all_formats(tmp_path):
    paths = {}
    paths["jsonl"] = tmp_path / "d.jsonl"
    paths["jsonl"].write_text("\n".join(json.dumps(r) for r in ROWS))
    paths["json-records"] = tmp_path / "records.json"
    paths["json-records"].write_text(json.dumps(ROWS))
    paths["json-columns"] = tmp_path / "columns.json"
    paths["json-columns"].write_text(json.dumps({k: [r[k] for r in ROWS] for k in ROWS[0]}))
    paths["json-data"] = tmp_path / "data.json"
    paths["json-data"].write_text(json.dumps({"data": ROWS}))
    paths["csv"] = tmp_path / "d.csv"
    paths["csv"].write_text("question,solution,level\n" + "".join(
        f"{r['question']},{r['solution']},{r['level']}\n" for r in ROWS))
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths["parquet"] = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), paths["parquet"])
    return paths


def test_every_file_format_gives_the_same_prompts(tmp_path):
    for kind, path in _write_all_formats(tmp_path).items():
        prompts = load_prompts(path, prompt_key="question", answer_key="solution")
        assert [p.prompt for p in prompts] == [r["question"] for r in ROWS], kind
        assert [p.answer for p in prompts] == ["2", "5", "2"], kind
        assert [str(p.metadata["level"]) for p in prompts] == ["1", "2", "3"], kind  # csv keeps strings
        assert len({p.prompt_id for p in prompts}) == 3, kind


def test_content_hash_ids_are_stable_and_deduplicated(jsonl, tmp_path):
    prompts = load_prompts(jsonl, prompt_key="question", answer_key="solution")
    first = content_id("What is 1+1?", "2")
    assert [p.prompt_id for p in prompts] == [first, content_id("What is 2+3?", "5"), first + "#1"]
    assert len(first) == 16 and int(first, 16) >= 0
    # reordered rows and a different template keep each row's id
    reordered = tmp_path / "reordered.jsonl"
    reordered.write_text("\n".join(json.dumps(r) for r in [ROWS[1], ROWS[0]]))
    again = load_prompts(reordered, prompt_key="question", answer_key="solution", template="Q: {prompt}")
    assert [p.prompt_id for p in again] == [prompts[1].prompt_id, prompts[0].prompt_id]


def test_id_column(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"row-{i}", "prompt": f"q{i}", "answer": i}) for i in range(3)))
    assert [p.prompt_id for p in load_prompts(path, id_key="id")] == ["row-0", "row-1", "row-2"]
    path.write_text("\n".join(json.dumps({"id": "same", "prompt": f"q{i}", "answer": i}) for i in range(2)))
    with pytest.raises(ValueError, match="'same'.*rows 0 and 1"):
        load_prompts(path, id_key="id")


def test_template_system_prompt_and_limit(jsonl):
    template = "{prompt} Let's think step by step and output the final answer within \\boxed{}."
    prompts = load_prompts(jsonl, prompt_key="question", answer_key="solution", template=template,
                           system_prompt="You are a careful solver.", limit=2)
    assert len(prompts) == 2
    assert prompts[0].prompt == [
        {"role": "system", "content": "You are a careful solver."},
        {"role": "user", "content": "What is 1+1? Let's think step by step and output the final answer within "
                                    "\\boxed{}."},
    ]
    plain = load_prompts(jsonl, prompt_key="question", answer_key=None)
    assert plain[1].prompt == "What is 2+3?" and plain[1].answer is None and "solution" in plain[1].metadata


def test_message_list_prompts_are_kept(tmp_path):
    path = tmp_path / "chat.jsonl"
    chat = [{"role": "user", "content": "Hi"}]
    with_system = [{"role": "system", "content": "Own"}, {"role": "user", "content": "Yo"}]
    path.write_text(json.dumps({"prompt": chat, "answer": "a"}) + "\n" + json.dumps({"prompt": with_system,
                                                                                    "answer": "b"}))
    prompts = load_prompts(path, template="{prompt}!", system_prompt="Sys")
    assert prompts[0].prompt == [{"role": "system", "content": "Sys"}, {"role": "user", "content": "Hi!"}]
    assert prompts[1].prompt == [{"role": "system", "content": "Own"}, {"role": "user", "content": "Yo!"}]


def test_hf_datasets_on_disk_and_by_path(tmp_path):
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_list(ROWS[:2])
    datasets.DatasetDict({"train": data, "test": data.select([1])}).save_to_disk(str(tmp_path / "dict"))
    data.save_to_disk(str(tmp_path / "single"))
    test = load_prompts(tmp_path / "dict", prompt_key="question", answer_key="solution", split="test")
    assert [p.prompt for p in test] == ["What is 2+3?"]
    single = load_prompts(str(tmp_path / "single"), prompt_key="question", answer_key="solution")
    assert [p.answer for p in single] == ["2", "5"]
    with pytest.raises(KeyError, match="no split 'validation'.*'train', 'test'"):
        load_prompts(tmp_path / "dict", prompt_key="question", split="validation")
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "train.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS))
    assert len(load_prompts(folder, prompt_key="question", answer_key="solution")) == 3  # via load_dataset


def test_clear_errors(tmp_path, jsonl):
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        load_prompts(tmp_path / "missing.jsonl")
    with pytest.raises(KeyError, match="no column 'prompt' \\(given as prompt_key\\).*'question', 'solution', "
                                       "'level'"):
        load_prompts(jsonl)
    with pytest.raises(KeyError, match="no column 'answer'"):
        load_prompts(jsonl, prompt_key="question")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        load_prompts(empty)
    text = tmp_path / "data.txt"
    text.write_text("x")
    with pytest.raises(ValueError, match="unsupported file type '.txt'.*.jsonl"):
        load_prompts(text)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt": "a"}\n{oops\n')
    with pytest.raises(ValueError, match="broken.jsonl:2: not valid JSON"):
        load_prompts(broken)
    with pytest.raises(ValueError, match="template must contain"):
        load_prompts(jsonl, prompt_key="question", template="no placeholder")
    with pytest.raises(ValueError, match="limit"):
        load_prompts(jsonl, prompt_key="question", limit=0)
    numbers = tmp_path / "numbers.jsonl"
    numbers.write_text(json.dumps({"prompt": 3, "answer": 1}))
    with pytest.raises(TypeError, match="row 0: the prompt must be a string"):
        load_prompts(numbers)
