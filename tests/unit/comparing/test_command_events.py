"""See NOTE [command arms]. A trial's hook events as its main loader's epochs."""

from __future__ import annotations

import dataclasses
from typing import Any

from loaderprof.comparing.command import CommandPlan, nothing_to_compare, saving, summarise
from loaderprof.comparing.command_events import CommandTrace
from loaderprof.inside.events import Ev
from loaderprof.inside.site import same_site
from loaderprof.model.command import CommandEpoch, CommandTrial

S = 1_000_000_000


def _created(lid: str, site: str, t: float, workers: int = 2, **kw: Any) -> dict[str, Any]:
    return {
        "ev": Ev.LOADER_CREATED,
        "t": int(t * S),
        "loader": lid,
        "site": site,
        "num_workers": workers,
        "persistent_asked": False,
        "persistent_workers": True,
        "dataset_type": kw.get("dataset_type", "Items"),
        "rank": kw.get("rank"),
        "built_for": kw.get("built_for"),
    }


def _epoch(
    lid: str, start: float, first: float, end: float, batches: int, ended: str = "exhausted"
):
    return [
        {"ev": Ev.ITER_START, "t": int(start * S), "loader": lid},
        {"ev": Ev.ITER_FIRST_BATCH, "t": int(first * S), "loader": lid},
        {"ev": Ev.ITER_END, "t": int(end * S), "loader": lid, "batches": batches, "ended": ended},
    ]


def test_the_main_loader_is_the_one_with_the_most_batches() -> None:
    trace = CommandTrace(0)
    trace.feed([_created("1.1", "train.py:10", 1.0), _created("1.2", "train.py:11", 1.1)])
    trace.feed(_epoch("1.1", 2.0, 2.5, 4.0, 20) + _epoch("1.2", 4.1, 4.3, 4.5, 4))
    trace.feed(_epoch("1.1", 5.0, 5.1, 6.0, 20))
    assert trace.main_id() == "1.1"
    # The second epoch is whole once the command ended, or the main loader's next
    # iter() came (see NOTE [epoch of the training]).
    assert trace.epochs_done() == 1
    trace.ended = True
    assert trace.epochs_done() == 2
    epochs = trace.epochs(5)
    # The first epoch holds the other loader's pass (4.1 to 4.5).
    assert [round(e.wall_s, 3) for e in epochs] == [2.5, 1.0]
    assert [round(e.others_s, 3) for e in epochs] == [0.4, 0.0]
    assert [round(e.first_batch_s or 0, 3) for e in epochs] == [0.5, 0.1]
    assert trace.built_s() == 1.0 and trace.before_first_s() == 2.0
    main = trace.main()
    assert main is not None and main.site == "train.py:10" and main.built == 1
    assert main.others == ("train.py:11",)


def test_the_trainers_eval_loaders_at_its_train_loaders_site_are_not_its_rebuilds() -> None:
    """The HF Trainer builds its train loader and an eval loader for each evaluation at
    the user's one site (inside/frameworks.py): the main loader is built once, and each
    eval pass is inside its epoch."""
    trace = CommandTrace(0)
    trace.feed([_created("1.1", "train.py:30", 0.5, built_for="train")])
    for k in range(3):
        t = 1.0 + 2 * k
        trace.feed(_epoch("1.1", t, t + 0.3, t + 1.0, 8))
        trace.feed([_created(f"1.{k + 2}", "train.py:30", t + 1.05, built_for="eval")])
        trace.feed(_epoch(f"1.{k + 2}", t + 1.1, t + 1.4, t + 1.6, 4))
    trace.ended = True
    main = trace.main()
    assert main is not None and (main.built, main.epochs_per_loader) == (1, 3)
    assert [round(e.others_s, 3) for e in trace.epochs(3)] == [0.5, 0.5, 0.5]


def test_an_epoch_holds_the_switched_loaders_passes_before_the_next_iter() -> None:
    """See NOTE [epoch of the training]. A validation pass after each train pass is in
    its epoch, waits included; a loader without workers (the arm leaves it alone) and a
    pass before the first epoch (a sanity check) are not; the trial's last epoch is
    whole only at the next iter()."""
    trace = CommandTrace(0)
    trace.feed([_created("1.1", "t.py:5", 0.5), _created("1.2", "t.py:6", 0.5)])
    trace.feed([_created("1.3", "t.py:7", 0.5, workers=0)])
    trace.feed(_epoch("1.2", 0.6, 0.7, 0.8, 2))  # a sanity check
    waits = {"wait_first": 0.3, "wait_steady": 0.1}
    for k in range(3):
        t = 1.0 + 2 * k
        train = _epoch("1.1", t, t + 0.4, t + 1.0, 20)
        train[-1].update(waits)
        val = _epoch("1.2", t + 1.1, t + 1.5, t + 1.6, 4)
        val[-1].update(waits)
        trace.feed(train + val + _epoch("1.3", t + 1.7, t + 1.75, t + 1.8, 4))
        assert trace.epochs_done() == k
    epochs = trace.epochs(5)
    assert [round(e.wall_s, 3) for e in epochs] == [1.6, 1.6]
    assert [round(e.others_s, 3) for e in epochs] == [0.5, 0.5]
    wait = epochs[1].wait
    assert wait is not None and (round(wait.first_s, 3), round(wait.steady_s, 3)) == (0.6, 0.2)
    assert wait.passes == 2  # the train and the validation pass's first batches
    main = trace.main()
    assert main is not None and main.others == ("t.py:6",)
    trace.ended = True
    assert trace.epochs_done() == 3


def test_loader_site_times_its_loader_alone() -> None:
    # The arm switches only the loader at --loader-site: the other runs alike in both.
    trace = CommandTrace(0, site="t.py:5")
    trace.feed([_created("1.1", "t.py:5", 0.5), _created("1.2", "t.py:6", 0.5)])
    for k in range(3):
        t = 1.0 + 2 * k
        trace.feed(
            _epoch("1.1", t, t + 0.4, t + 1.0, 20) + _epoch("1.2", t + 1.1, t + 1.5, t + 1.6, 4)
        )
    assert [round(e.wall_s, 3) for e in trace.epochs(5)] == [1.0, 1.0]


def test_a_cut_validation_pass_is_projected_at_its_own_rate() -> None:
    # A validation pass cut after 4 of its 10 batches, 0.1 s a batch once they flow,
    # would run 0.6 s longer whole (see NOTE [cut epochs]).
    trace = CommandTrace(0)
    trace.feed([_created("1.1", "t.py:5", 0.5), _created("1.2", "t.py:6", 0.5)])
    for k in range(2):
        t = 1.0 + 2 * k
        val = _epoch("1.2", t + 1.1, t + 1.5, t + 1.9, 4, ended="cut")
        val[0]["planned"] = 10
        val[-1]["last_batch"] = int((t + 1.8) * S)
        trace.feed(_epoch("1.1", t, t + 0.4, t + 1.0, 20) + val)
    trace.ended = True
    first = trace.epochs(5)[0]
    assert round(first.others_s, 3) == 0.8 and round(first.others_full_s or 0, 3) == 1.4


def test_an_open_epoch_does_not_count_until_it_ends() -> None:
    trace = CommandTrace(0)
    trace.feed([_created("1.1", "t.py:3", 0.5)])
    trace.feed(_epoch("1.1", 1.0, 1.2, 2.0, 10)[:2])
    assert trace.epochs_done() == 0 and trace.main_id() is None
    trace.feed(_epoch("1.1", 1.0, 1.2, 2.0, 10, ended="left")[2:])
    assert trace.epochs_done() == 0
    trace.feed(_epoch("1.1", 2.0, 2.2, 3.0, 10)[:1])
    assert trace.epochs_done() == 1


def test_a_loader_rebuilt_every_epoch_counts_its_rebuilds_and_has_nothing_to_compare() -> None:
    trace = CommandTrace(0)
    for i in range(3):
        trace.feed([_created(f"1.{i}", "t.py:7", 1.0 + 2 * i)])
        trace.feed(_epoch(f"1.{i}", 1.1 + 2 * i, 1.5 + 2 * i, 2.5 + 2 * i, 8))
    trace.ended = True
    assert trace.epochs_done() == 3
    main = trace.main()
    assert main is not None and main.built == 3 and main.epochs_per_loader == 1
    trial = CommandTrial(1, "persistent", trace.epochs(3), 1.0, 1.1, main, True, None, 7.0)
    why = nothing_to_compare(trial)
    assert why is not None and "built anew every epoch" in why


def test_loader_site_chooses_the_main_loader() -> None:
    trace = CommandTrace(0, site="/w/val.py:4")
    trace.feed([_created("1.1", "train.py:10", 1.0), _created("1.2", "/w/val.py:4", 1.1)])
    trace.feed(_epoch("1.1", 2.0, 2.5, 4.0, 20) + _epoch("1.2", 4.1, 4.3, 4.5, 4))
    assert trace.main_id() == "1.2"


def test_same_site_takes_any_spelling_of_the_file() -> None:
    assert same_site("train.py:10", "train.py:10")
    assert same_site("/a/b/train.py:10", "b/train.py:10")
    assert not same_site("/a/b/train.py:10", "train.py:11")
    assert not same_site("/a/b/xtrain.py:10", "train.py:10")


def _trial(i: int, arm: str, steady: float) -> CommandTrial:
    steady_epochs = [
        CommandEpoch(k, steady * (1 + 0.01 * k + 0.005 * i), 0.1, 8) for k in (2, 3, 4)
    ]
    epochs = (CommandEpoch(1, 1.0, 0.5, 8), *steady_epochs)
    return CommandTrial(i, arm, epochs, 0.8, 1.0, None, True, None, 5.0)  # type: ignore[arg-type]


def test_the_saving_is_the_steady_ratio_times_the_non_persistent_epoch() -> None:
    p = [_trial(1, "persistent", 0.1), _trial(4, "persistent", 0.1)]
    n = [_trial(2, "non_persistent", 0.4), _trial(3, "non_persistent", 0.4)]
    s = saving(p, n, seed=0)
    assert s is not None and s.unit == "trial"
    assert abs(s.saved_s - 0.3 * 1.03) < 0.01
    assert s.low_s is not None and s.high_s is not None and s.low_s < s.saved_s < s.high_s
    report = summarise(
        CommandPlan(("python", "t.py"), 4, 2), (p[0], n[0], n[1], p[1]), None, False, 20.0
    )
    assert report.verdict is not None and report.verdict.recommendation == "enable"
    assert report.complete and report.persistent is not None
    # The saving is the difference of the two geometric means the line names.
    from loaderprof.report.command_text import render

    assert s.non_persistent_s is not None
    persistent_s = s.non_persistent_s * s.ratio.value
    assert abs(s.saved_s - (s.non_persistent_s - persistent_s)) < 1e-12
    text = " ".join(render(report, 200).split())
    assert f"({s.non_persistent_s:.3f} s → {persistent_s:.3f} s, geometric means" in text


def test_one_trial_per_arm_earns_no_interval() -> None:
    s = saving([_trial(1, "persistent", 0.1)], [_trial(2, "non_persistent", 0.4)], seed=0)
    assert s is not None and s.low_s is None and s.high_s is None
    report = summarise(
        CommandPlan(("python", "t.py"), 4, 1),
        (_trial(1, "persistent", 0.1), _trial(2, "non_persistent", 0.4)),
        None,
        False,
        9.0,
    )
    assert report.verdict is not None and not report.verdict.decided


def test_two_trials_too_spread_to_tell_say_so_not_that_more_trials_are_needed() -> None:
    """See NOTE [earned intervals]. Two trials per arm whose interval reaches past 10×
    either way earn none: the saving line gives that reason, as the verdict does."""
    from loaderprof.report.command_text import render

    p = (_trial(1, "persistent", 0.02), _trial(4, "persistent", 3.0))
    n = (_trial(2, "non_persistent", 0.4), _trial(3, "non_persistent", 0.41))
    report = summarise(
        CommandPlan(("python", "t.py"), 4, 2), (p[0], n[0], n[1], p[1]), None, False, 20.0
    )
    assert report.saving is not None and report.saving.ratio.has_interval
    assert report.saving.low_s is None
    text = " ".join(render(report, 200).split())
    assert "(no interval: its 95 % interval reaches more than 10× either way)" in text
    assert "needs ≥ 2 trials" not in text


def test_under_torchrun_each_epoch_is_the_slowest_ranks() -> None:
    # See NOTE [ranks in a command]. Two ranks build the loader at one line; rank 1's
    # second epoch is the slow one, and it has ended one epoch fewer so far.
    trace = CommandTrace(0)
    trace.feed([_created("1.1", "t.py:9", 1.0, rank=0), _created("2.1", "t.py:9", 1.0, rank=1)])
    trace.feed(_epoch("1.1", 2.0, 2.4, 3.0, 8) + _epoch("1.1", 3.0, 3.1, 3.5, 8))
    trace.feed(_epoch("1.1", 3.5, 3.6, 4.0, 8))
    trace.feed(_epoch("2.1", 2.0, 2.3, 2.9, 8) + _epoch("2.1", 2.9, 3.0, 3.8, 8))
    # Rank 1's second epoch is whole at its third iter() (NOTE [epoch of the training]).
    assert trace.epochs_done() == 1
    trace.feed(_epoch("2.1", 3.8, 3.9, 4.5, 8)[:1])
    assert trace.epochs_done() == 2
    epochs = trace.epochs(5)
    assert [round(e.wall_s, 3) for e in epochs] == [1.0, 0.9]
    assert [round(e.first_batch_s or 0, 3) for e in epochs] == [0.4, 0.1]
    main = trace.main()
    assert main is not None and main.ranks == 2 and main.built == 1


def test_under_torchrun_a_loader_rebuilt_every_epoch_is_counted_per_rank() -> None:
    trace = CommandTrace(0)
    for i in range(3):
        for rank in (0, 1):
            lid = f"{rank + 1}.{i}"
            trace.feed([_created(lid, "t.py:7", 1.0 + 2 * i, rank=rank)])
            trace.feed(_epoch(lid, 1.1 + 2 * i, 1.5 + 2 * i, 2.5 + 2 * i, 8))
    trace.ended = True
    assert trace.epochs_done() == 3
    main = trace.main()
    assert main is not None and (main.built, main.epochs_per_loader, main.ranks) == (3, 1, 2)


def test_the_last_epoch_of_a_command_that_ended_holds_its_validation_not_its_test() -> None:
    # No next iter() ends it: one pass of each loader the epochs before held, not a
    # test pass the script ran after its training (see NOTE [epoch of the training]).
    trace = CommandTrace(0)
    sites = {"1.1": "t.py:5", "1.2": "t.py:6", "1.3": "t.py:9"}
    trace.feed([_created(lid, site, 0.5) for lid, site in sites.items()])
    for k in range(2):
        t = 1.0 + 2 * k
        trace.feed(
            _epoch("1.1", t, t + 0.4, t + 1.0, 20) + _epoch("1.2", t + 1.1, t + 1.2, t + 1.5, 4)
        )
    trace.feed(_epoch("1.3", 4.0, 4.1, 7.0, 40))  # trainer.test()
    trace.ended = True
    assert [round(e.wall_s, 3) for e in trace.epochs(5)] == [1.5, 1.5]
    assert [round(e.others_s, 3) for e in trace.epochs(5)] == [0.4, 0.4]


def test_a_test_pass_after_the_training_is_not_the_main_loader() -> None:
    # A script that ended by itself after 3 epochs, then ran its test set once: more
    # batches than all its training, but one pass, so no epoch of the training.
    trace = CommandTrace(0)
    trace.feed([_created("1.1", "t.py:5", 0.5), _created("1.2", "t.py:9", 0.5)])
    for k in range(3):
        trace.feed(_epoch("1.1", 1.0 + k, 1.2 + k, 1.8 + k, 10))
    trace.feed(_epoch("1.2", 4.0, 4.2, 9.0, 100))
    trace.ended = True
    assert trace.main_id() == "1.1" and trace.epochs_done() == 3
    assert [round(e.wall_s, 3) for e in trace.epochs(5)] == [0.8, 0.8, 0.8]
    main = trace.main()
    assert main is not None and main.site == "t.py:5" and main.others == ()
    # Before the training's second iter(), every loader has run once: batches decide.
    early = CommandTrace(0)
    early.feed([_created("1.1", "t.py:5", 0.5), _created("1.2", "t.py:9", 0.5)])
    early.feed(_epoch("1.1", 1.0, 1.2, 1.8, 10) + _epoch("1.2", 1.9, 2.0, 2.5, 12))
    assert early.main_id() == "1.2"


def _screen(persistent_s: float, non_persistent_s: float, **main: Any) -> tuple[Any, str]:
    """A 2-trials-a-side command report whose main loader is `main`, and its screen at
    80 columns with its lines joined."""
    from loaderprof.model.command import MainLoader
    from loaderprof.report.command_text import render

    loader = MainLoader("train.py:40", 2, False, True, 1, 4)
    loader = dataclasses.replace(loader, **main)
    steady = {"persistent": persistent_s, "non_persistent": non_persistent_s}
    trials = tuple(
        dataclasses.replace(_trial(i, arm, steady[arm]), main=loader)
        for i, arm in enumerate(("persistent", "non_persistent", "non_persistent", "persistent"), 1)
    )
    report = summarise(CommandPlan(("python", "t.py"), 4, 2), trials, None, False, 20.0)
    return report, " ".join(render(report, 80).split())


def test_a_framework_s_own_setting_is_named_where_the_user_turns_it_on() -> None:
    setting = "TrainingArguments.dataloader_persistent_workers"
    report, text = _screen(0.1, 0.4, setting=setting)
    assert report.verdict is not None and report.verdict.recommendation == "enable"
    assert f"the script asks {setting}=False" in text
    assert f"turn it on with {setting}=True: the framework builds the loader" in text
    # The DataLoader's own flag: no such line.
    _, text = _screen(0.1, 0.4)
    assert "the script asks persistent_workers=False" in text and "turn it on" not in text
    # A script that asks for it already has it on: nothing to turn on.
    _, text = _screen(0.1, 0.4, setting=setting, persistent_asked=True)
    assert f"the script asks {setting}=True" in text and "turn it on" not in text
    assert f"the script asks {setting}=True already: keep it" in text
    # A script that asks for it, where the verdict keeps it off: say to turn it off.
    off, text = _screen(0.4, 0.1, persistent_asked=True)
    assert off.verdict is not None and off.verdict.recommendation == "keep_off"
    assert "the script asks persistent_workers=True: turn it off (persistent_workers=False)" in text
