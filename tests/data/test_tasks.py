"""Built-in tasks: the arithmetic generator and the reasoning-gym wrapper, end to end with their verifiers."""

from __future__ import annotations

import pytest

from reinforce_ada.data import ArithmeticTask, get_task, list_tasks, split_of
from reinforce_ada.types import Completion


def test_arithmetic_prompts_are_deterministic_and_correct():
    task = get_task("arithmetic", digits=2, operators="+-*")
    assert task.name == "arithmetic" and task.verifier_name == "arithmetic"
    prompts = task.prompts(200, seed=3)
    assert [p.prompt_id for p in prompts] == [p.prompt_id for p in task.prompts(200, seed=3)]
    assert [p.prompt_id for p in prompts] != [p.prompt_id for p in task.prompts(200, seed=4)]
    assert len({p.prompt_id for p in prompts}) == 200
    for p in prompts:
        a, b, op = p.metadata["a"], p.metadata["b"], p.metadata["operator"]
        assert p.prompt == f"{a}{op}{b}=" and 0 <= a < 100 and 0 <= b < 100
        assert int(p.answer) == {"+": a + b, "-": a - b, "*": a * b}[op]
    assert {p.metadata["operator"] for p in prompts} == {"+", "-", "*"}


def test_arithmetic_train_and_test_never_overlap():
    task = ArithmeticTask(digits=1)  # 100 expressions: ask for every test one and most train ones
    test = task.prompts(sum(split_of(f"{a}+{b}=", 0.1) == "test" for a in range(10) for b in range(10)), 0, "test")
    train = task.prompts(60, seed=0, split="train")
    assert not {p.prompt_id for p in test} & {p.prompt_id for p in train}
    assert all(split_of(p.prompt, 0.1) == "test" for p in test)
    with pytest.raises(ValueError, match="has only"):
        task.prompts(len(test) + 1, seed=0, split="test")


def test_arithmetic_prompts_fit_the_tiny_tokenizer_and_score():
    from reinforce_ada.models.tiny import TINY_VOCAB

    task = get_task("arithmetic", digits=3, operators="+-")
    prompts = task.prompts(50, seed=0)
    assert all(set(p.prompt) | set(p.answer) <= set(TINY_VOCAB) for p in prompts)
    verifier = task.verifier()
    completions = [Completion(p.prompt_id, p.answer + "<eos>") for p in prompts[:3]]
    completions += [Completion(p.prompt_id, str(int(p.answer) + 1)) for p in prompts[3:5]]
    assert verifier(prompts[:5], completions) == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_task_errors():
    assert "arithmetic" in list_tasks()
    with pytest.raises(ValueError, match="unknown task 'algebra'"):
        get_task("algebra")
    with pytest.raises(ValueError, match="digits"):
        get_task("arithmetic", digits=0)
    with pytest.raises(ValueError, match="operators"):
        get_task("arithmetic", operators="/")
    with pytest.raises(ValueError, match="split"):
        get_task("arithmetic").prompts(1, seed=0, split="validation")
    with pytest.raises(ValueError, match="num"):
        get_task("arithmetic").prompts(0, seed=0)


def test_reasoning_gym_basic_arithmetic_end_to_end():
    pytest.importorskip("reasoning_gym")
    task = get_task("reasoning-gym:basic_arithmetic", system_prompt="Answer in <answer></answer> tags.")
    assert task.name == "reasoning-gym:basic_arithmetic" and task.verifier_name == "reasoning-gym"
    train = task.prompts(8, seed=0)
    test = task.prompts(4, seed=0, split="test")
    assert len({p.prompt_id for p in train}) == 8
    assert not {p.prompt_id for p in train} & {p.prompt_id for p in test}
    assert [p.prompt_id for p in train] == [p.prompt_id for p in task.prompts(8, seed=0)]
    prompt = train[0]
    assert prompt.prompt[0] == {"role": "system", "content": "Answer in <answer></answer> tags."}
    assert prompt.prompt[1]["content"] == prompt.metadata["reasoning_gym"]["entry"]["question"]
    verifier = task.verifier()
    wrong = str(int(prompt.answer) + 1)
    completions = [Completion(prompt.prompt_id, f"Let me compute. <answer>{prompt.answer}</answer>"),
                   Completion(prompt.prompt_id, f"<answer>{wrong}</answer>"),
                   Completion(prompt.prompt_id, prompt.answer)]  # no tags: no answer under extract="answer_tag"
    assert verifier([prompt] * 3, completions) == [1.0, 0.0, 0.0]
    assert verifier.stats["no_answer"] == 1
    assert verifier([train[1].__class__("x", "q")], [Completion("x", "<answer>1</answer>")]) == [None]


def test_reasoning_gym_errors():
    pytest.importorskip("reasoning_gym")
    with pytest.raises(ValueError, match="unknown reasoning-gym dataset 'nope'"):
        get_task("reasoning-gym:nope")
    with pytest.raises(TypeError):
        get_task("reasoning-gym:basic_arithmetic", no_such_option=3)


def test_mixed_arithmetic_has_operands_of_every_length_and_every_operator():
    task = get_task("arithmetic-mixed")
    assert task.name == "arithmetic-mixed" and task.verifier_name == "arithmetic"
    prompts = task.prompts(400, seed=0)
    assert [p.prompt_id for p in prompts] == [p.prompt_id for p in task.prompts(400, seed=0)]
    assert len({p.prompt_id for p in prompts}) == 400
    lengths = {len(str(p.metadata[k])) for p in prompts for k in ("a", "b")}
    assert lengths == {1, 2} and {p.metadata["operator"] for p in prompts} == {"+", "-", "*"}
    for p in prompts:
        a, b, op = p.metadata["a"], p.metadata["b"], p.metadata["operator"]
        assert p.prompt == f"{a}{op}{b}=" and int(p.answer) == {"+": a + b, "-": a - b, "*": a * b}[op]
    test = task.prompts(200, seed=0, split="test")
    assert not {p.prompt_id for p in test} & {p.prompt_id for p in prompts}
    with pytest.raises(ValueError, match="at most a quarter"):
        task.prompts(5000, seed=0, split="test")


def test_chat_arithmetic_split_is_fixed():
    """The split is a hash of the prompt text: the same expressions are held out on every machine and for every seed
    (these are the first held-out expressions of each family, in order), train and test never share one, and
    together they are every expression of the families."""
    from reinforce_ada.data.tasks import ChatArithmeticTask

    task = ChatArithmeticTask()
    test, train = task.members("test"), task.members("train")
    assert {name: pairs[:3] for name, pairs in test.items()} == {
        "1+1": [(1, 0), (1, 2), (1, 6)], "1-1": [(0, 4), (1, 4), (1, 5)], "1*1": [(0, 1), (0, 6), (0, 8)],
        "2+1": [(10, 3), (10, 7), (11, 1)]}
    assert {name: len(pairs) for name, pairs in test.items()} == {"1+1": 30, "1-1": 22, "1*1": 18, "2+1": 217}
    for name in task.families:
        assert not set(test[name]) & set(train[name])
        assert len(test[name]) + len(train[name]) == (100 if name[0] == "1" else 900)
    held_out = task.prompts(64, seed=3, split="test")
    assert all(split_of(p.prompt, 0.25) == "test" for p in held_out)
    assert not {p.prompt_id for p in held_out} & {p.prompt_id for p in task.prompts(200, seed=3, split="train")}
    assert [p.prompt_id for p in task.prompts(8, seed=3)] == [p.prompt_id for p in task.prompts(8, seed=3)]
    assert [p.prompt_id for p in task.prompts(8, seed=3)] != [p.prompt_id for p in task.prompts(8, seed=4)]


def test_chat_arithmetic_prompts_answers_and_families():
    from collections import Counter

    task = get_task("arithmetic-chat")
    assert "arithmetic-chat" in list_tasks() and task.verifier_name == "last-integer"
    prompts = task.prompts(96, seed=0)
    for p in prompts:
        a, op, b = p.metadata["a"], p.metadata["operator"], p.metadata["b"]
        assert p.prompt == f"What is {a} {op} {b}? Reply with just the number."
        assert p.prompt_id == f"{a}{op}{b}" and int(p.answer) == (a + b if op == "+" else a - b if op == "-" else a * b)
        digits_a, _, digits_b = p.metadata["family"]
        assert len(str(a)) == int(digits_a) and len(str(b)) == int(digits_b)
    families = Counter(p.metadata["family"] for p in prompts)
    assert set(families) == {"1+1", "1-1", "1*1", "2+1"} and min(families.values()) >= 15  # drawn family first
    assert len({p.prompt_id for p in prompts}) == 96
    verifier = task.verifier()
    assert verifier(prompts[:2], [Completion(p.prompt_id, f"The answer is {p.answer}.") for p in prompts[:2]]) == [
        1.0, 1.0]
    only = get_task("arithmetic-chat", families="2+1,1*1")
    assert {p.metadata["family"] for p in only.prompts(20, seed=0)} == {"2+1", "1*1"}
    with pytest.raises(ValueError, match=r"family '3\+1'"):
        get_task("arithmetic-chat", families="3+1")
    with pytest.raises(ValueError, match="has 287"):
        task.prompts(300, seed=0, split="test")


def test_a_default_pool_of_arithmetic_chat_keeps_every_family():
    """The trainer's default pool (no --task-train-prompts) takes as many prompts as the task draws with every
    family still in the mix (Task.pool_size), not the whole split, three quarters of which are two-digit sums."""
    from collections import Counter

    from reinforce_ada.config import TrainConfig
    from reinforce_ada.runs.data import run_task, training_prompts

    config = TrainConfig(model="smollm2-135m", task="arithmetic-chat")
    task = run_task(config)
    pool = training_prompts(config, task)
    assert len(pool) == task.pool_size("train") == 280
    assert max(Counter(p.metadata["family"] for p in pool).values()) <= 80
    assert len(training_prompts(TrainConfig(model="smollm2-135m", task="arithmetic-chat", task_train_prompts=600),
                                task)) == 600  # asked for: as many as the split holds
