"""Rich tables for the terminal."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from loaderprof.results import ArmResult, Ratio, Report, Stat
from loaderprof.units import fmt_bytes, fmt_seconds

ARM_LABEL = {"persistent": "persistent", "non_persistent": "non-persistent"}
VERDICT_STYLE = {"enable": "bold green", "keep_off": "bold red", "neutral": "bold yellow"}


def _stat(stat: Stat | None, fmt: Callable[[float], str]) -> str:
    if stat is None:
        return "–"
    if stat.n == 1:
        return fmt(stat.median)
    return f"{fmt(stat.median)} ± {fmt(stat.iqr / 2)} (n={stat.n})"


def _sec(v: float) -> str:
    return fmt_seconds(v)


def _bytes(v: float) -> str:
    return fmt_bytes(v)


def _ratio(r: Ratio | None) -> str:
    if r is None:
        return "–"
    return f"×{r.value:.2f} [{r.ci_low:.2f}–{r.ci_high:.2f}]"


def _reused(arm: ArmResult) -> str:
    value = arm.summary.workers_reused
    return {True: "yes", False: "no", None: "unclear"}[value]


def summary_table(report: Report) -> Table:
    cfg = report.config
    lo = cfg["loader"]
    title = (
        f"{cfg['dataset']} · {lo['num_workers']} workers · batch {lo['batch_size']} · "
        f"{cfg['epochs']} epochs × {cfg['trials']} trial(s) · "
        f"{report.environment.get('start_method') or lo['mp_context'] or 'default'}"
    )
    t = Table(title=title, title_justify="left", header_style="bold")
    t.add_column("arm")
    t.add_column("workers reused")
    t.add_column("cold epoch", justify="right")
    t.add_column("steady epoch", justify="right")
    t.add_column("first batch", justify="right")
    t.add_column("worker start-up", justify="right")
    t.add_column("peak USS / worker", justify="right")
    t.add_column("peak PSS total", justify="right")
    t.add_column("idle USS held", justify="right")
    for name in ("persistent", "non_persistent"):
        arm = report.arms[name]
        s = arm.summary
        t.add_row(
            ARM_LABEL[name],
            _reused(arm),
            _stat(s.cold_epoch_s, _sec),
            _stat(s.steady_epoch_s, _sec),
            _stat(s.first_batch_s, _sec),
            _stat(s.worker_startup_s, _sec),
            _stat(s.peak_worker_uss_bytes, _bytes),
            _stat(s.peak_total_pss_bytes, _bytes),
            _stat(s.idle_workers_uss_bytes, _bytes),
        )
    c = report.comparison
    if c is not None:
        t.add_section()
        p = report.arms["persistent"].summary
        n = report.arms["non_persistent"].summary

        def delta_bytes(a: Stat | None, b: Stat | None) -> str:
            if a is None or b is None:
                return "–"
            return fmt_bytes(a.median - b.median, signed=True)

        t.add_row(
            "persistent / non-persistent",
            "",
            _ratio(c.cold_epoch_ratio),
            _ratio(c.steady_epoch_ratio),
            _ratio(c.first_batch_ratio),
            "",
            delta_bytes(p.peak_worker_uss_bytes, n.peak_worker_uss_bytes),
            delta_bytes(p.peak_total_pss_bytes, n.peak_total_pss_bytes),
            delta_bytes(p.idle_workers_uss_bytes, n.idle_workers_uss_bytes),
            style="italic",
        )
    t.caption = (
        "median ± half the IQR (n) · ratios: median ratio [95 % bootstrap CI] · "
        "steady = epochs 2..N · USS = private memory (a worker's true cost), "
        "PSS = shared pages split among users"
    )
    return t


def _pids(pids: tuple[int, ...]) -> str:
    if not pids:
        return "–"
    if len(pids) <= 4:
        return " ".join(map(str, pids))
    return f"{' '.join(map(str, pids[:3]))} … (+{len(pids) - 3})"


def epochs_table(report: Report) -> Table:
    t = Table(title="Epochs (first trial of each arm)", title_justify="left",
              header_style="bold")
    t.add_column("epoch", justify="right")
    for name in ("persistent", "non_persistent"):
        label = ARM_LABEL[name]
        t.add_column(f"{label} wall", justify="right")
        t.add_column("first batch", justify="right")
        t.add_column("samples/s", justify="right")
        t.add_column("worker PIDs (new*)")
    arms = [report.arms[n].trials[0] if report.arms[n].trials else None
            for n in ("persistent", "non_persistent")]
    n_epochs = max((len(a.epochs) for a in arms if a is not None), default=0)
    for i in range(n_epochs):
        row = [str(i + 1)]
        for trial in arms:
            if trial is None or i >= len(trial.epochs):
                row += ["–", "–", "–", "–"]
                continue
            e = trial.epochs[i]
            marker = "*" if e.new_worker_pids else ""
            row += [
                fmt_seconds(e.wall_s),
                fmt_seconds(e.first_batch_s),
                f"{e.samples_per_s:,.0f}" if e.samples_per_s else "–",
                _pids(e.worker_pids) + marker,
            ]
        t.add_row(*row)
    return t


def workers_table(report: Report) -> Table:
    t = Table(title="Worker processes", title_justify="left", header_style="bold")
    for col in ("arm", "trial", "pid", "worker", "epoch", "start→ready", "first batch",
                "exited", "batches", "peak USS", "peak PSS", "peak RSS"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for name in ("persistent", "non_persistent"):
        for trial in report.arms[name].trials:
            for w in trial.workers:
                t.add_row(
                    ARM_LABEL[name], str(trial.index), str(w.pid), str(w.worker_id),
                    str(w.first_epoch or "–"), fmt_seconds(w.startup_s),
                    fmt_seconds(w.first_batch_s), fmt_seconds(w.exited_s), str(w.batches),
                    fmt_bytes(w.peak_uss_bytes), fmt_bytes(w.peak_pss_bytes),
                    fmt_bytes(w.peak_rss_bytes),
                )
    t.caption = "times in seconds from the trial start; RSS counts shared pages in every process"
    return t


def verdict_panel(report: Report) -> RenderableType:
    v = report.verdict
    if v is None:
        return Panel(Text("No verdict: not enough was measured.", style="bold yellow"),
                     title="verdict", title_align="left")
    body = Text()
    body.append(f"{v.recommendation.upper()}  ", style=VERDICT_STYLE[v.recommendation])
    body.append(v.headline)
    for reason in v.reasons:
        body.append(f"\n • {reason}")
    return Panel(body, title="verdict", title_align="left",
                 border_style=VERDICT_STYLE[v.recommendation].split()[-1])


def render(report: Report, *, verbose: bool = False) -> RenderableType:
    parts: list[RenderableType] = [summary_table(report), epochs_table(report)]
    if verbose:
        parts.append(workers_table(report))
    parts.append(verdict_panel(report))
    for w in report.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))
    if not report.complete:
        parts.append(Text("incomplete: some trials failed or were stopped; figures cover "
                          "the trials that finished", style="bold red"))
    for e in report.errors:
        parts.append(Text(f"error: {e.message}", style="red"))
    return Group(*parts)


def print_report(report: Report, console: Console, *, verbose: bool = False) -> None:
    console.print(render(report, verbose=verbose))
