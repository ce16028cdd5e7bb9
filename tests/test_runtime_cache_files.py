"""Cache entries (the composed configs, TRL's accepted fields, the start-of-run evaluation)
are written whole or not at all, and a cache that cannot be written only means recomputing:
records.write_cache_file and the start-evaluation cache on top of it."""

import json

from grpo_ablate.records import write_cache_file
from grpo_ablate.training.start_eval import StartEvalCache


def test_a_cache_file_is_written_whole_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "sub" / "entry.json"
    assert write_cache_file(path, '{"a": 1}') is True
    assert json.loads(path.read_text()) == {"a": 1}
    assert write_cache_file(path, '{"a": 2}') is True  # replaced, not appended
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["entry.json"]


def test_an_unwritable_cache_is_false_not_an_error(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    assert write_cache_file(blocker / "entry.json", "x") is False
    assert list(tmp_path.iterdir()) == [blocker]


def test_the_start_evaluation_is_computed_once_then_reused_with_its_origin(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"accuracy": 0.25, "reward_mean": -0.5}

    first, origin = StartEvalCache("k", root=tmp_path).get_or_compute(compute)
    assert origin is None and calls == [1]
    again, origin = StartEvalCache("k", root=tmp_path).get_or_compute(compute)
    assert again == first and calls == [1]
    assert origin == str(tmp_path / "start-evals" / "k.json")
    other, origin = StartEvalCache("other", root=tmp_path).get_or_compute(compute)
    assert origin is None and calls == [1, 1]


def test_a_start_evaluation_cache_that_cannot_be_written_computes_every_time(tmp_path):
    (tmp_path / "start-evals").write_text("")  # a file where the cache folder would be
    calls = []

    def compute():
        calls.append(1)
        return {"accuracy": 0.5}

    for _ in range(2):
        metrics, origin = StartEvalCache("k", root=tmp_path).get_or_compute(compute)
        assert metrics == {"accuracy": 0.5} and origin is None
    assert calls == [1, 1]
