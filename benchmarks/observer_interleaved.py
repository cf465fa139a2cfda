"""Does the sampler slow the epochs it times? Sampling on and off, trial by trial.

`observer_effect.py` compares whole compare runs with sampling on and off, a
minute apart, and this machine drifts by far more than the effect it looks for
between runs that far apart. Here the two settings alternate trial by trial in
one scheduler session, through the same warm template (NOTE [template]):

    per arm, pairs of timing trials: on off | off on | on off | ...

A timing trial with sampling on is what `compare` runs by default (the parent's
sampler reads the set-up, then holds still while the epochs run: NOTE [timing and
memory trials]); with sampling off there is no sampler at all. Each pair's ratio
is its two trials' median steady epochs, on ÷ off, taken seconds apart; the
figure is the median of the pairs' ratios with a seeded bootstrap 95 % interval
over pairs (the pair is the unit).

That ratio is as noisy as the machine. So the benchmark also measures the cause
directly: the CPU time this process's other threads (the sampler's two; the
runner's thread is the one that sees the events) used between each epoch's
start and end, from /proc/self/task/TID/schedstat. A held sampler reads nothing
(0 readings in timed epochs: observer_effect.py), so it can touch the trial only
through the CPU it takes, and that CPU over the epochs' wall bounds the observer
effect from above, whatever the machine's noise. (A sampler that read smaps in
the epochs would also stall the workers' page faults on their memory-map lock,
which no CPU figure shows.)

    python benchmarks/observer_interleaved.py --pairs 12 \\
        --out benchmarks/results/observer_interleaved.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from observer_effect import add_workload_args, workload

from loaderprof.comparing.scheduler import Scheduled, run_trials
from loaderprof.config.build import build_config
from loaderprof.measure.runner import TrialSlot

ARMS = (("persistent", True), ("non_persistent", False))


def other_threads_cpu_ns() -> dict[int, int]:
    """CPU nanoseconds used so far by each of this process's threads other than the
    caller (`schedstat`: nanoseconds, where `stat` counts 10 ms ticks)."""
    me = threading.get_native_id()
    used: dict[int, int] = {}
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                used[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended since the listing
    return used


class EpochCpu:
    """The other threads' CPU inside each epoch, per trial: what the sampler took.
    Only threads alive at both ends count: the last epoch's end may be seen after
    the trial's sampler has stopped and its threads are gone."""

    def __init__(self) -> None:
        self.cpu_s: dict[int, float] = defaultdict(float)
        self.wall_s: dict[int, float] = defaultdict(float)
        self._open: tuple[dict[int, int], int] | None = None

    def __call__(self, slot: TrialSlot, ev: Mapping[str, Any] | None) -> None:
        if ev is None:
            return
        if ev["ev"] == "epoch_start":
            self._open = (other_threads_cpu_ns(), ev["t"])
        elif ev["ev"] == "epoch_end" and self._open is not None:
            before, t0 = self._open
            after = other_threads_cpu_ns()
            used = sum(after[t] - before[t] for t in before.keys() & after.keys())
            self.cpu_s[slot.index] += used / 1e9
            self.wall_s[slot.index] += (ev["t"] - t0) / 1e9
            self._open = None


def paired(ratios: list[float], seed: int = 0) -> dict[str, float]:
    rng = random.Random(seed)
    boots = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(4000))
    return {"value": statistics.median(ratios), "ci_low": boots[100], "ci_high": boots[3899]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=12, help="on/off pairs per arm")
    ap.add_argument("--epochs", type=int, default=6)
    add_workload_args(ap)
    a = ap.parse_args()
    common = workload(a, trials=1)
    cfgs = {
        "on": build_config({**common, "sample_interval_ms": a.sample_interval}),
        "off": build_config({**common, "sample_interval_ms": 0.0}),
    }
    labels: list[tuple[str, str]] = []
    items = []
    for i in range(a.pairs):
        for arm, persistent in ARMS:
            order = ("on", "off") if i % 2 == 0 else ("off", "on")
            for label in order:
                labels.append((arm, label))
                slot = TrialSlot(arm, persistent, len(labels), role="timing")
                items.append(Scheduled(cfgs[label], slot))
    cpu = EpochCpu()
    outcome = run_trials(items, on_progress=cpu)
    trials = outcome.trials
    if len(trials) != len(items) or not all(t.complete for t in trials):
        sys.exit("a trial failed or was stopped: no figure")
    medians: dict[str, dict[str, list[float]]] = {arm: {"on": [], "off": []} for arm, _ in ARMS}
    # Per arm and setting: [other threads' CPU in the epochs, the epochs' wall].
    used = {arm: {"on": [0.0, 0.0], "off": [0.0, 0.0]} for arm, _ in ARMS}
    for (arm, label), t, item in zip(labels, trials, items, strict=True):
        medians[arm][label].append(statistics.median(e.wall_s for e in t.epochs[1:]))
        used[arm][label][0] += cpu.cpu_s[item.spec.index]
        used[arm][label][1] += cpu.wall_s[item.spec.index]
    result: dict[str, Any] = {"config": vars(a) | {"out": str(a.out)}, "arms": {}}
    for arm, _ in ARMS:
        ratios = [x / y for x, y in zip(medians[arm]["on"], medians[arm]["off"], strict=True)]
        r = paired(ratios)
        cpu_s, wall_s = used[arm]["on"]
        result["arms"][arm] = {
            "sampling_on_over_off": r,
            # The bound: the other threads' CPU inside the timed epochs over their
            # wall, with sampling on (and off, where no sampler thread exists).
            "sampler_cpu_in_epochs_s": cpu_s,
            "epochs_wall_s": wall_s,
            "other_threads_cpu_in_epochs_off_s": used[arm]["off"][0],
            "slowdown_bound": 1 + cpu_s / wall_s if wall_s else None,
            "pair_ratios": ratios,
            "steady_median_s": medians[arm],
        }
        print(
            f"{arm:<16} sampling on ÷ off {r['value']:.3f} [{r['ci_low']:.3f}–{r['ci_high']:.3f}]"
            f" over {len(ratios)} pairs; sampler CPU in the epochs {cpu_s * 1000:.0f} ms"
            f" of {wall_s:.1f} s (bound {1 + cpu_s / wall_s if wall_s else float('nan'):.4f})",
            file=sys.stderr,
        )
    if a.out:
        a.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
