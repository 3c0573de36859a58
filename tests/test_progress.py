"""Progress you can see: units report to a file, the runner prints each line in order with a
count and the time left."""

import os

from bnpaper import follow, progress


class FakeClock:
    """Seconds that a test sets by hand."""

    def __init__(self, t: float = 100.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_the_runner_prints_each_finished_unit_in_order_with_the_time_left(tmp_path):
    clock, logged = FakeClock(), []
    path = tmp_path / "03_lira.progress"
    with follow.following("03_lira", path, logged.append, every=0.01) as in_order:
        assert os.environ[progress.ENV] == str(path)
        pool = progress.Counter("shadows lenet/bn", total=32, done=8, clock=clock)
        pool.begin()
        clock.t = 160.0  # 4 trained in 60 s: 15 s each, 20 to go
        pool.add(4)
        clock.t = 220.0  # 8 in 120 s: 15 s each, 16 to go
        pool.add(4)
        clock.t = 250.0  # 11 in 150 s, 13 to go: 177 s
        pool.add(3)
        clock.t = 400.0
        pool.add(13)
        progress.Counter("model").add(seconds=11.4, detail="lenet/bn seed 3")
        in_order("[bnpaper] 03_lira: cell 5/13 done (60 s)")  # after the units the cell trained
    assert logged == [
        "[bnpaper] 03_lira: shadows lenet/bn 8/32 trained, 24 to go",
        "[bnpaper] 03_lira: shadows lenet/bn 12/32 trained, about 5 min left",
        "[bnpaper] 03_lira: shadows lenet/bn 16/32 trained, about 4 min left",
        "[bnpaper] 03_lira: shadows lenet/bn 19/32 trained, about 3 min left",
        "[bnpaper] 03_lira: shadows lenet/bn 32/32 trained in 5 min",
        "[bnpaper] 03_lira: model 1 trained: lenet/bn seed 3 (11 s)",
        "[bnpaper] 03_lira: cell 5/13 done (60 s)",
    ]
    assert progress.ENV not in os.environ and not path.exists()


def test_the_time_left_is_the_time_per_finished_unit_times_the_units_to_go():
    rec = {"what": "shadows", "total": 10, "first": 2, "verb": "trained"}
    assert follow.progress_line("03", dict(rec, done=4, elapsed=40.0)).endswith("about 2 min left")
    assert follow.progress_line("03", dict(rec, done=9, elapsed=70.0)).endswith("about 10 s left")


def test_a_line_still_being_written_waits_for_the_next_read(tmp_path):
    path = tmp_path / "p"
    path.write_text('{"a": 1}\n{"b"')
    tail = follow.ProgressTail(path)
    assert tail.records() == [{"a": 1}]
    with open(path, "a") as fh:
        fh.write(": 2}\n")
    assert tail.records() == [{"b": 2}] and tail.records() == []


def test_throttled_counters_write_only_every_so_many_seconds(tmp_path, monkeypatch):
    monkeypatch.setenv(progress.ENV, str(tmp_path / "p"))
    clock = FakeClock(0.0)
    epochs = progress.Counter("packed x8 bn", 10, verb="epochs done", every=60.0, clock=clock)
    for t in (10.0, 50.0, 70.0, 100.0, 140.0):
        clock.t = t
        epochs.add()
    recs = follow.ProgressTail(tmp_path / "p").records()
    assert [(r["done"], r["elapsed"]) for r in recs] == [(3, 70.0), (5, 140.0)]


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    progress.Counter("model").add()
    assert list(tmp_path.iterdir()) == []


def test_a_time_under_a_second_reads_as_one_second_not_zero():
    rec = {"what": "shadows", "total": 4, "first": 0, "done": 2, "elapsed": 0.4, "verb": "trained"}
    assert follow.progress_line("03", rec) == "03: shadows 2/4 trained, about 1 s left"
