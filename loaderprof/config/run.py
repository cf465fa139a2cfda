"""The run's configuration, typed: `RunConfig` (frozen) with its loader's options and
its `Schedule`. config/build.py makes one from flags and TOML and validates it once;
everything downstream may trust it, and a report records the one it ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

MP_CONTEXTS = ("fork", "spawn", "forkserver")
AUTO = "auto"
# Trials per arm of a plan that cannot adapt (a sweep, a torchrun job) under "auto".
FIXED_TRIALS = 3
# Options whose RunConfig field carries its unit: the flag's name (--sample-interval)
# and the field's (sample_interval_ms) are both accepted in a config file and the API.
FLAG_KEYS = {
    "sample_interval": "sample_interval_ms",
    "uss_interval": "uss_interval_ms",
    "trial_timeout": "trial_timeout_s",
}


@dataclass(frozen=True)
class Schedule:
    """How many trials per arm a run takes, decided once for compare and compare --
    COMMAND alike (NOTE [sequential looks]): adaptive (a look at 2, 3, ... stops once
    the verdict is settled, at most `max_trials`) or `fixed` per arm. A sweep always
    runs `fixed`."""

    adaptive: bool
    max_trials: int
    fixed: int
    # Why a plan is fixed, in the report's words.
    fixed_why: str

    @staticmethod
    def of(trials: int | str, max_trials: int, world_size: int = 1) -> Schedule:
        """--trials auto adapts, except under torchrun, where every rank runs one fixed
        plan together (their trials start at one barrier, so none may stop alone)."""
        return Schedule(
            adaptive=trials == AUTO and world_size == 1,
            max_trials=max_trials,
            fixed=trials if isinstance(trials, int) else FIXED_TRIALS,
            fixed_why="--trials" if trials != AUTO else "torchrun: every rank runs one fixed plan",
        )

    @property
    def per_arm(self) -> int:
        """The most trials per arm it may take (the progress bar's total)."""
        return self.max_trials if self.adaptive else self.fixed

    @property
    def cap(self) -> int | None:
        """The adaptive plan's cap, None for a fixed plan (`VerdictInputs.max_trials`,
        the report's `max_trials`)."""
        return self.max_trials if self.adaptive else None


@dataclass(frozen=True)
class LoaderOptions:
    """What is passed through to `torch.utils.data.DataLoader`."""

    num_workers: int = 2
    # None disables automatic batching (the dataset yields whole batches).
    batch_size: int | None = 32
    prefetch_factor: int | None = None
    pin_memory: bool = False
    # None: the platform's default start method.
    mp_context: str | None = None
    shuffle: bool | None = None
    drop_last: bool = False
    # None: torch's default (in order); False needs torch ≥ 2.6.
    in_order: bool | None = None
    timeout: float = 0.0
    collate_fn: str | None = None
    worker_init_fn: str | None = None
    # A DataLoader class as module:attr (a subclass, torchdata's StatefulDataLoader),
    # built with the same keyword arguments plus `loader_args`; None: torch's own.
    loader_class: str | None = None
    loader_args: Mapping[str, Any] = field(default_factory=dict)


# See NOTE [timing and memory trials]. Two give each memory figure a spread of its own.
DEFAULT_MEMORY_TRIALS = 2


@dataclass(frozen=True)
class RunConfig:
    dataset: str
    dataset_args: Mapping[str, Any] = field(default_factory=dict)
    loader: LoaderOptions = field(default_factory=LoaderOptions)
    epochs: int = 5
    # "auto": the adaptive plan (NOTE [sequential looks]) runs A B B A blocks, looking
    # at 2, 3, 4, 6, ... trials per arm, until the verdict settles or `max_trials` per
    # arm; an integer fixes the plan.
    trials: int | str = "auto"
    max_trials: int = 6
    warmup_trials: int = 0
    # See NOTE [timing and memory trials]. Memory trials per arm, sampled deeply and not
    # timed. Two give each memory figure a spread of its own (NOTE [earned
    # intervals]) and the timing figures' spread a second source (NOTE [spread of an
    # arm]). None: DEFAULT_MEMORY_TRIALS where the plan has room for more than one
    # trial per arm, none in `check`'s one-trial plan; a number given runs in any plan.
    memory_trials: int | None = None
    seed: int = 0
    # Simulated per-batch training step in the main process (sleep: the
    # accelerator computes while the CPU is free for the workers).
    step_ms: float = 0.0
    sample_interval_ms: float = 50.0
    # USS/PSS (a page-table walk) while an epoch is timed; every sample outside.
    uss_interval_ms: float = 500.0
    # Pause after each epoch (outside epoch timing) so the sampler sees what
    # workers hold between epochs; None means 2 sample intervals (see NOTE [sampled
    # pauses]; a pause lasts until the sampler has read every process in it anyway).
    idle_ms: float | None = None
    trial_timeout_s: float = 900.0
    # Smallest steady-epoch speed-up worth enabling persistence for.
    min_gain: float = 0.05
    # Epochs of the user's real training (None: `epochs`), for totals.
    train_epochs: int | None = None
    memory_budget_bytes: int | None = None
    # Content digest of every sample (`loaderprof check`): finds duplicates and
    # RNG carried in workers, at a cost in epoch time.
    digests: bool = False
    # See NOTE [epoch protocol]. Before each epoch the trial calls set_epoch(epoch)
    # (from 0) on the sampler and the Dataset where they define it, as Lightning
    # and the HF Trainer do, then the user's hook FN(loader, epoch).
    set_epoch: bool = True
    epoch_hook: str | None = None
    # See NOTE [stale worker state]. Fingerprint the Dataset each epoch in the main
    # process and the workers.
    state_checks: bool = True
    # See NOTE [short epochs]. Persistence changes an epoch's start, not its length, so
    # epochs may be cut to this many batches and projected to full ones; an
    # IterableDataset without len() needs the samples of a full epoch.
    max_batches: int | None = None
    epoch_samples: int | None = None
    # See NOTE [template]. Trials are forked from a warm template process; True starts
    # every trial as a fresh interpreter instead.
    fresh_interpreter: bool = False
    # Keep every batch span and memory sample in the JSON (see detail.py).
    full_detail: bool = False
    # Under torchrun: this rank and the world size (each rank loads its shard
    # through a DistributedSampler). Set from the environment, not by users.
    rank: int = 0
    world_size: int = 1
    # NOTE [validation pass]: a second Dataset each epoch runs through after the train
    # pass, on its own loader (persistent in the persistent arm too); None: the
    # train loader's batch size and workers.
    val: str | None = None
    val_args: Mapping[str, Any] = field(default_factory=dict)
    val_batch_size: int | None = None
    val_num_workers: int | None = None
    # The file the settings came from: --config, or the project's pyproject.toml the
    # CLI found (None: flags and defaults only). Recorded so a report says what set it.
    config_file: str | None = None

    @property
    def val_loader(self) -> LoaderOptions | None:
        """The validation loader's options: the train loader's, its own batch size and
        workers, never shuffled or cut short of its last batch."""
        if self.val is None:
            return None
        lo = self.loader
        return replace(
            lo,
            batch_size=self.val_batch_size if self.val_batch_size is not None else lo.batch_size,
            num_workers=(
                self.val_num_workers if self.val_num_workers is not None else lo.num_workers
            ),
            shuffle=None,
            drop_last=False,
        )

    @property
    def schedule(self) -> Schedule:
        """This run's one answer to how its plan runs: the scheduler, the verdict, the
        report's plan and the progress bar all ask here."""
        return Schedule.of(self.trials, self.max_trials, self.world_size)

    @property
    def adaptive(self) -> bool:
        return self.schedule.adaptive

    @property
    def fixed_trials(self) -> int:
        """Trials per arm where a plan cannot adapt (sweeps, torchrun): --trials N, or 3."""
        return self.schedule.fixed

    @property
    def memory_pairs(self) -> int:
        """See NOTE [timing and memory trials]. How many memory trials (sampled deeply, not
        timed) each arm runs beside its timing trials, where sampling is on:
        `memory_trials` as given; by default DEFAULT_MEMORY_TRIALS where the plan has
        room for more than one trial per arm, else none (`check` reads memory from its
        one trial unless asked for more)."""
        if self.sample_interval_ms <= 0:
            return 0
        if self.memory_trials is not None:
            return self.memory_trials
        roomy = self.adaptive or self.fixed_trials >= 2
        return DEFAULT_MEMORY_TRIALS if roomy else 0

    @property
    def planned_trials(self) -> int:
        """The most trials per arm this run may take (the progress bar's total)."""
        return self.schedule.per_arm

    @property
    def effective_idle_ms(self) -> float:
        if self.idle_ms is not None:
            return self.idle_ms
        return 2 * self.sample_interval_ms

    def recorded(self) -> RunConfig:
        """As a report records it (`Report.config`): the pause after each epoch that
        ran, not the rule that sized it."""
        return replace(self, idle_ms=self.effective_idle_ms)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as the trial child receives it and a report's JSON holds it."""
        d = asdict(self.recorded())
        d["dataset_args"] = dict(self.dataset_args)
        d["val_args"] = dict(self.val_args)
        d["loader"]["loader_args"] = dict(self.loader.loader_args)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """The inverse of `to_dict` (as the trial child and saved reports hold it);
        keys this version does not know are ignored."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known and k != "loader"}
        loader_known = {f.name for f in fields(LoaderOptions)}
        loader = {k: v for k, v in (data.get("loader") or {}).items() if k in loader_known}
        return cls(**values, loader=LoaderOptions(**loader))
