"""`plan`: the host memory a training node needs, projected from a measured report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command()(plan)


def plan(
    path: Annotated[Path, typer.Argument(help="A compare report (JSON).")],
    ranks: Annotated[int, typer.Option(help="Training processes per node.")] = 1,
    num_workers: Annotated[
        int | None,
        typer.Option("--num-workers", "-w", help="Workers per rank (default: as measured)."),
    ] = None,
    arm: Annotated[str, typer.Option(help="persistent or non_persistent.")] = "persistent",
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> int:
    """Project the host memory a training node needs: ranks × workers per rank."""
    from loaderprof.analysis.capacity import project
    from loaderprof.commands.common import stdout_console
    from loaderprof.model.environment import environment
    from loaderprof.report.console import plan_table
    from loaderprof.report.json_report import read_report
    from loaderprof.units import fmt_bytes

    report = read_report(path, needs="loaderprof plan reads compare reports")
    w = num_workers if num_workers is not None else report.config.loader.num_workers
    proj = project(report, ranks=ranks, num_workers=w, arm=arm, environment=environment(None))
    console = stdout_console(False)
    console.print(plan_table(proj, ranks=ranks, num_workers=w, arm=arm))
    for a in proj.assumptions:
        console.print(f"assumes: {a}", style="dim", highlight=False)
    if proj.over_limit:
        sys.stderr.write(
            f"loaderprof: warning: the projection ({fmt_bytes(proj.node_bytes)}) exceeds this "
            f"machine's {proj.limit_source} ({fmt_bytes(proj.limit_bytes)})\n"
        )
    return 0
