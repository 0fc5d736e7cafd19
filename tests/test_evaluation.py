"""pass@k against hand arithmetic and brute force; evaluate() with a scripted generator whose rewards are known."""

import itertools
import json
import math

import pytest

from reinforce_ada.evaluation import evaluate, format_results, pass_at_k
from reinforce_ada.types import Completion, Prompt


# -- pass@k ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, c, k, expected", [
    (4, 1, 2, 1 - 3 / 6),             # 1 - C(3,2)/C(4,2)
    (5, 2, 2, 1 - 3 / 10),            # 1 - C(3,2)/C(5,2)
    (10, 3, 1, 3 / 10),               # pass@1 is c/n
    (10, 3, 4, 1 - 35 / 210),         # 1 - C(7,4)/C(10,4)
    (32, 1, 32, 1.0),                 # k = n: any correct sample passes
    (32, 0, 8, 0.0),
    (6, 5, 2, 1.0),                   # n - c < k
    (8, 2, 3, 1 - 20 / 56),           # 1 - C(6,3)/C(8,3)
])
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_brute_force_enumeration():
    """The fraction of k-subsets of n samples (c correct) containing at least one correct sample."""
    for n in range(1, 8):
        for c in range(n + 1):
            samples = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(samples, k))
                brute = sum(any(s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_for_large_n():
    # 1 - C(900, 100) / C(1000, 100) through log-gamma, where the binomials overflow a float
    log_ratio = (math.lgamma(901) - math.lgamma(801) - math.lgamma(1001) + math.lgamma(901))
    assert pass_at_k(1000, 100, 100) == pytest.approx(1 - math.exp(log_ratio), rel=1e-9)


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_pass_at_k_rejects_bad_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# -- evaluate ---------------------------------------------------------------------------------------------------------
class ScriptedGenerator:
    """Returns, for each prompt, completions whose text is the planned reward ("1", "0" or "x" for unscorable)."""

    def __init__(self):
        self.calls: list[list[tuple]] = []

    def generate(self, requests):
        self.calls.append([(r.prompt.prompt_id, r.num_samples) for r in requests])
        out = []
        for r in requests:
            plan = r.prompt.metadata["plan"]
            out.append([Completion(r.prompt.prompt_id, plan[i % len(plan)], finish_reason="stop")
                        for i in range(r.num_samples)])
        return out


def verifier(prompts, completions):
    return [None if c.text == "x" else float(c.text) for c in completions]


def prompt(pid, plan):
    return Prompt(pid, f"question {pid}", answer="42", metadata={"plan": plan})


def test_evaluate_reports_known_metrics(tmp_path):
    k = 4
    datasets = {
        "alpha": [prompt("a0", "1100"), prompt("a1", "0000"), prompt("a2", "1111")],
        "beta": [prompt("b0", "10x0"), prompt("b1", "0001")],
    }
    gen = ScriptedGenerator()
    out = tmp_path / "gens.jsonl"
    results = evaluate(gen, verifier, datasets, k, out_jsonl=out, batch_size=2, progress=False)

    alpha = results["datasets"]["alpha"]
    assert alpha["ave@k"] == pytest.approx((2 / 4 + 0 / 4 + 4 / 4) / 3)
    assert alpha["pass@1"] == pytest.approx(alpha["ave@k"])
    assert alpha["pass@k"] == pytest.approx((1 + 0 + 1) / 3)
    assert (alpha["num_prompts"], alpha["num_samples"], alpha["num_verifier_failures"]) == (3, 12, 0)
    beta = results["datasets"]["beta"]
    assert beta["ave@k"] == pytest.approx((1 / 4 + 1 / 4) / 2)  # the unscorable sample counts as wrong
    assert beta["pass@k"] == pytest.approx(1.0)
    assert beta["num_verifier_failures"] == 1
    average = results["average"]
    assert average["num_prompts"] == 5
    assert average["ave@k"] == pytest.approx((3 * alpha["ave@k"] + 2 * beta["ave@k"]) / 5)
    assert average["pass@k"] == pytest.approx((3 * (2 / 3) + 2 * 1.0) / 5)
    assert results["k"] == 4

    # batches of 2 prompts, k samples each
    assert gen.calls == [[("a0", 4), ("a1", 4)], [("a2", 4)], [("b0", 4), ("b1", 4)]]

    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 20
    assert lines[0] == {"dataset": "alpha", "prompt_id": "a0", "prompt": "question a0", "answer": "42",
                        "completion": "1", "reward": 1.0, "correct": True, "finish_reason": "stop"}
    unscorable = [line for line in lines if line["completion"] == "x"]
    assert unscorable == [{"dataset": "beta", "prompt_id": "b0", "prompt": "question b0", "answer": "42",
                           "completion": "x", "reward": None, "correct": False, "finish_reason": "stop"}]
    table = format_results(results)
    assert "Ave@4" in table and "average (by prompts)" in table and "66.67" in table


def test_pass_at_k_within_evaluate_uses_the_estimator():
    """k samples: pass@k of one prompt is 1 if any is correct; pass@1 is c/k."""
    results = evaluate(ScriptedGenerator(), verifier, {"d": [prompt("p", "01")]}, 2, progress=False)
    row = results["datasets"]["d"]
    assert (row["pass@1"], row["pass@k"]) == (0.5, 1.0)


def test_evaluate_per_dataset_verifiers_and_bad_input():
    datasets = {"a": [prompt("p", "1")], "b": [prompt("q", "1")]}
    flipped = lambda prompts, completions: [1.0 - float(c.text) for c in completions]  # noqa: E731
    results = evaluate(ScriptedGenerator(), {"a": verifier, "b": flipped}, datasets, 1, progress=False)
    assert results["datasets"]["a"]["ave@k"] == 1.0 and results["datasets"]["b"]["ave@k"] == 0.0
    with pytest.raises(ValueError, match="no verifier"):
        evaluate(ScriptedGenerator(), {"a": verifier}, datasets, 1, progress=False)
    with pytest.raises(ValueError, match="k must be"):
        evaluate(ScriptedGenerator(), verifier, datasets, 0, progress=False)
    with pytest.raises(ValueError, match="dataset 'd'.*duplicated"):
        evaluate(ScriptedGenerator(), verifier, {"d": [prompt("p", "1"), prompt("p", "0")]}, 1, progress=False)


def test_evaluate_with_the_hf_backend_on_the_tiny_model(tmp_path):
    import torch


    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model is far faster on one thread on a shared machine
    try:
        _check_tiny_model_evaluation(tmp_path)
    finally:
        torch.set_num_threads(threads)


def _check_tiny_model_evaluation(tmp_path):
    from reinforce_ada.generation import get_generator
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    gen = get_generator("hf", build_tiny_model(), build_char_tokenizer(), max_new_tokens=4, seed=0)
    digit_first = lambda prompts, completions: [float(c.text[:1].isdigit()) for c in completions]  # noqa: E731
    out = tmp_path / "gens.jsonl"
    results = evaluate(gen, digit_first, {"d": [Prompt(i, f"{i}+1=") for i in range(3)]}, 4, out_jsonl=out,
                       progress=False)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 12 and {line["prompt_id"] for line in lines} == {0, 1, 2}
    rewards = [line["reward"] for line in lines]
    assert results["datasets"]["d"]["ave@k"] == pytest.approx(sum(rewards) / 12)
    per_prompt_any = [any(line["reward"] for line in lines if line["prompt_id"] == i) for i in range(3)]
    assert results["datasets"]["d"]["pass@k"] == pytest.approx(sum(per_prompt_any) / 3)


# -- command line ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    path = tmp_path_factory.mktemp("tiny")
    build_tiny_model().save_pretrained(path)
    build_char_tokenizer().save_pretrained(path)
    return path


def run_eval(argv):
    from reinforce_ada.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["eval", *argv])
    return args.func(args)


def test_cli_with_stand_in_data_and_verifier_modules(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    """The CLI's wiring: task: sources vs load_prompts, verifier choice, jsonl and JSON output."""
    import sys
    import types

    import torch

    import reinforce_ada.verifiers.registry  # noqa: F401 -- `train --help` lists its names when the parser is built
    import reinforce_ada.data.tasks  # noqa: F401 -- and the built-in tasks' names, before `data` is stood in for
    import reinforce_ada.verifiers.timed  # noqa: F401 -- the verifier watch eval wraps around each verifier

    calls = {}

    class Task:
        verifier_name = "digit"

        def prompts(self, num, seed, split):
            calls["task"] = (num, seed, split)
            return [Prompt(f"t{i}", f"{i}+{i}=") for i in range(num)]

    def load_prompts(source, **options):
        calls["load_prompts"] = (source, options)
        return [Prompt("f0", "9-3="), Prompt("f1", "2*2=")]

    def get_verifier(name):
        calls.setdefault("verifiers", []).append(name)
        if name == "digit":
            return lambda prompts, completions: [float(c.text[:1].isdigit()) for c in completions]
        return lambda prompts, completions: [1.0 for _ in completions]

    data = types.ModuleType("reinforce_ada.data")
    data.get_task = lambda name: calls.setdefault("task_name", name) and Task()
    data.load_prompts = load_prompts
    verifiers = types.ModuleType("reinforce_ada.verifiers")
    verifiers.get_verifier = get_verifier
    monkeypatch.setitem(sys.modules, "reinforce_ada.data", data)
    monkeypatch.setitem(sys.modules, "reinforce_ada.verifiers", verifiers)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path / "gens.jsonl"
        code = run_eval(["--model", str(tiny_checkpoint), "--data", "task:arith", "--data", "file.jsonl",
                         "--k", "3", "--max-new-tokens", "4", "--limit", "2", "--prompt-key", "question",
                         "--template", "Q: {prompt}", "--out", str(out), "--json"])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    assert calls["task_name"] == "arith" and calls["task"] == (2, 0, "test")
    assert calls["load_prompts"] == ("file.jsonl", {"prompt_key": "question", "template": "Q: {prompt}", "limit": 2})
    assert calls["verifiers"] == ["digit", "math"]  # the task's own verifier; --verifier's default for files
    results = json.loads(capsys.readouterr().out)
    assert results["k"] == 3 and results["verifiers"] == {"task:arith": "digit", "file.jsonl": "math"}
    row = dict(results["datasets"]["file.jsonl"])
    entropy, num_tokens = row.pop("entropy"), row.pop("num_tokens")  # the hf backend's model measures it
    assert row == {"num_prompts": 2, "num_samples": 6, "num_verifier_failures": 0, "ave@k": 1.0, "pass@1": 1.0,
                   "pass@k": 1.0, "pass_curve": {"1": 1.0, "2": 1.0, "3": 1.0}}
    assert entropy > 0 and 6 <= num_tokens <= 6 * 4  # 3 samples of 2 prompts, 1-4 tokens each
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    task_rewards = [line["reward"] for line in lines if line["dataset"] == "task:arith"]
    assert len(lines) == 12 and results["datasets"]["task:arith"]["ave@k"] == pytest.approx(sum(task_rewards) / 6)
    assert results["average"]["num_prompts"] == 4


def test_cli_rejects_bad_arguments_before_loading(tmp_path):
    with pytest.raises(ValueError, match="missing does not exist \\(a run folder, a checkpoint or a model folder\\)"):
        run_eval(["--model", str(tmp_path / "missing"), "--data", "x"])
    with pytest.raises(ValueError, match="twice"):
        run_eval(["--model", str(tmp_path), "--data", "x", "--data", "x"])
    with pytest.raises(ValueError, match="--k"):
        run_eval(["--model", str(tmp_path), "--data", "x", "--k", "0"])


def test_cli_with_the_real_task_and_verifier(tiny_checkpoint, tmp_path, capsys):
    """task:arithmetic through the real data and verifier modules: the prompts are the task's test prompts and the
    written rewards are what the task's verifier gives those completions."""
    import torch

    from reinforce_ada.data import get_task
    from reinforce_ada.verifiers import get_verifier

    out = tmp_path / "gens.jsonl"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert run_eval(["--model", str(tiny_checkpoint), "--data", "task:arithmetic", "--k", "2", "--limit", "3",
                         "--max-new-tokens", "5", "--seed", "4", "--out", str(out), "--json"]) == 0
    finally:
        torch.set_num_threads(threads)
    results = json.loads(capsys.readouterr().out)
    assert results["verifiers"] == {"task:arithmetic": get_task("arithmetic").verifier_name}
    task_prompts = get_task("arithmetic").prompts(3, seed=4, split="test")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["prompt_id"] for line in lines] == [p.prompt_id for p in task_prompts for _ in range(2)]
    prompts = [p for p in task_prompts for _ in range(2)]
    completions = [Completion(p.prompt_id, line["completion"]) for p, line in zip(prompts, lines)]
    expected = list(get_verifier(results["verifiers"]["task:arithmetic"])(prompts, completions))
    assert [line["reward"] for line in lines] == expected
    row = results["datasets"]["task:arithmetic"]
    assert row["num_samples"] == 6
    assert row["ave@k"] == pytest.approx(sum(r > 0.5 for r in expected) / 6)
