"""A TrialRunner without processes: synthetic events through the real `assemble_trial`.

The scheduler, sweep and API take a runner; with this one they are unit-tested
in milliseconds. Costs are known by construction: each worker start costs
`startup_s`, each epoch's work `work_s`; persistence pays the start-up once.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loaderprof.config.run import RunConfig
from loaderprof.measure.assemble import assemble_trial
from loaderprof.measure.runner import EventCallback, TrialInterrupted, TrialSlot
from loaderprof.measure.sampler import Sample
from loaderprof.model.trials import TrialError, TrialResult
from loaderprof.units import MiB

S = 1_000_000_000


@dataclass
class FakeRunner:
    startup_s: float = 0.2
    work_s: float = 0.1
    # Relative noise on every epoch (seeded, so runs repeat).
    jitter: float = 0.02
    worker_uss: int = 40 * MiB
    main_pss: int = 300 * MiB
    # (arm, index) pairs whose trial fails in epoch 2, or is interrupted there.
    fail: set[tuple[str, int]] = field(default_factory=set)
    interrupt: set[tuple[str, int]] = field(default_factory=set)
    # A walk cut short in the middle of epoch 1, having read the main process only:
    # its readings count for the main's own figures and may never be summed.
    cut_walk: bool = False
    calls: list[tuple[RunConfig, TrialSlot]] = field(default_factory=list)
    _pids: Any = field(default_factory=lambda: itertools.count(1000))
    closed: bool = False

    def close(self) -> None:
        # What the scheduler calls on the runner it made (the template's teardown).
        self.closed = True

    def __call__(
        self,
        cfg: RunConfig,
        slot: TrialSlot,
        workdir: Path,
        on_event: EventCallback | None = None,
    ) -> TrialResult:
        self.calls.append((cfg, slot))
        # A stable seed (str hashes differ between interpreters).
        rng = random.Random(zlib.crc32(f"{slot.arm}/{slot.index}/{cfg.seed}".encode()))
        events, samples, t = self._trial(cfg, slot, rng)
        error = None
        key = (slot.arm, slot.index)
        if key in self.fail or key in self.interrupt:
            cut = next(
                i for i, ev in enumerate(events) if ev["ev"] == "epoch_start" and ev["epoch"] == 2
            )
            events = events[: cut + 1]
            error = TrialError("run", "worker_exception", "DataLoader worker 0 raised boom", 2)
            if key in self.interrupt:  # as the runner records a trial a signal stopped
                error = TrialError("interrupted", "interrupted", "stopped by an interrupt")
            events.append({"ev": "error", "t": events[-1]["t"] + 1, "pid": 1, "epoch": 2})
        for ev in events:
            if on_event is not None:
                on_event(ev)
        result = assemble_trial(
            arm=slot.arm,
            index=slot.index,
            t0_ns=0,
            t_end_ns=t,
            main_pid=1,
            returncode=3 if error else 0,
            events=events,
            samples=samples,
            error=error,
        )
        result = dataclasses.replace(result, role=slot.role, warmup=slot.warmup)
        if key in self.interrupt:
            raise TrialInterrupted(result) from KeyboardInterrupt()
        return result

    def _trial(
        self, cfg: RunConfig, slot: TrialSlot, rng: random.Random
    ) -> tuple[list[Mapping[str, Any]], list[Sample], int]:
        t = int(2.0 * S)
        events: list[Mapping[str, Any]] = [
            {"ev": "child_start", "t": int(0.1 * S), "pid": 1},
            {"ev": "imported", "t": int(1.5 * S), "pid": 1},
            {"ev": "dataset_built", "t": int(1.8 * S), "pid": 1},
            {"ev": "loader_building", "t": int(1.85 * S), "pid": 1},
            {"ev": "loader_built", "t": int(1.9 * S), "pid": 1},
        ]
        samples: list[Sample] = [Sample(0, int(1.82 * S), 1, 0, self.main_pss, 100, 280 * MiB)]
        workers = max(cfg.loader.num_workers, 0)
        pids: list[int] = []
        tick = 1
        for epoch in range(1, cfg.epochs + 1):
            fresh = not slot.persistent or epoch == 1
            wall = (self.startup_s if fresh and workers else 0.0) + self.work_s
            wall *= 1 + rng.uniform(-self.jitter, self.jitter)
            start, end = t, t + int(wall * S)
            events.append({"ev": "epoch_start", "t": start, "pid": 1, "epoch": epoch})
            if fresh:
                pids = [next(self._pids) for _ in range(workers)]
                for wid, pid in enumerate(pids):
                    events.append(
                        {"ev": "worker_init", "t": start + 1000, "pid": pid, "worker_id": wid}
                    )
                    events.append(
                        {
                            "ev": "worker_ready",
                            "t": start + int(self.startup_s * S),
                            "pid": pid,
                            "worker_id": wid,
                        }
                    )
            for pid in pids:
                events.append(
                    {"ev": "batch", "t": end - 2000, "pid": pid, "start": end - 5000, "n": 8}
                )
            events.append({"ev": "first_batch", "t": end - 1000, "pid": 1, "epoch": epoch})
            # A fresh pool's start-up is waited for before the first batch (NOTE [data wait]).
            first = (self.startup_s if fresh and workers else 0.0) + 0.05 * self.work_s
            events.append(
                {
                    "ev": "epoch_end",
                    "t": end,
                    "pid": 1,
                    "epoch": epoch,
                    "batches": len(pids),
                    "wait_first": round(first, 6),
                    "wait_steady": round(0.1 * self.work_s, 6),
                }
            )
            mid = (start + end) // 2
            samples.append(Sample(tick, mid, 1, 0, self.main_pss, 100, self.main_pss))
            samples += [
                Sample(tick, mid, p, 1, 2 * self.worker_uss, self.worker_uss, self.worker_uss)
                for p in pids
            ]
            tick += 1
            if self.cut_walk and epoch == 1:
                late = (mid + end) // 2
                samples.append(
                    Sample(tick, late, 1, 0, self.main_pss, 100, self.main_pss, whole=False)
                )
                tick += 1
            idle_start, idle_end = end + 1000, end + int(0.15 * S)
            events.append({"ev": "idle_start", "t": idle_start, "pid": 1, "epoch": epoch})
            held = pids if slot.persistent else []
            samples.append(Sample(tick, idle_start + 1000, 1, 0, self.main_pss, 100, self.main_pss))
            samples += [
                Sample(
                    tick,
                    idle_start + 1000,
                    p,
                    1,
                    2 * self.worker_uss,
                    self.worker_uss,
                    self.worker_uss,
                )
                for p in held
            ]
            tick += 1
            events.append({"ev": "idle_end", "t": idle_end, "pid": 1, "epoch": epoch})
            t = idle_end + 1000
        events += [
            {"ev": "loader_closing", "t": t, "pid": 1},
            {"ev": "loader_closed", "t": t + int(0.01 * S), "pid": 1, "workers_alive": 0},
            {"ev": "trial_end", "t": t + int(0.011 * S), "pid": 1},
        ]
        return events, samples, t + int(0.02 * S)
