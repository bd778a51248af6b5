"""The run's outputs, assembled above both the runner and the leaderboard.

:mod:`privaudit.audit` computes cells and writes the results tables; :mod:`privaudit.leaderboard`
ranks and draws (pure functions of a results table). This layer reads a finished or partial run
and writes what a person looks at — per-attack Pareto plots, the combined frontier figure, the
leaderboard files with the worst-case family figure, the HTML report — and it is what the CLI
and the Python API call: :func:`run_grid` and :func:`audit` are the runner's and the plugin
audit's entry points with the outputs attached.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.audit.guarantee_audit import QUICK_SIZES, audit_points, to_frame
from privaudit.audit.plugin import audit as audit_cells
from privaudit.audit.runner import run_grid as run_cells
from privaudit.audit.store import DiskFull, RunDir
from privaudit.leaderboard.figures import run_styles
from privaudit.leaderboard.strength import strength_figure
from privaudit.outputs.leaderboard import write_leaderboard
from privaudit.outputs.plots import plot_families, plot_frontiers, plot_pareto, save_figure
from privaudit.outputs.report import write_report
from privaudit.outputs.runs import load_runs

if TYPE_CHECKING:
    from privaudit.audit.config import GridConfig
    from privaudit.audit.plugin import AuditResult
    from privaudit.audit.runner import RunResult


def run_grid(config: GridConfig, **options: Any) -> RunResult:
    """:func:`privaudit.audit.runner.run_grid` with the run's outputs written at the end
    (:func:`write_outputs`): the Python API's one call for a grid."""
    return run_cells(config, outputs=write_outputs, **options)


def audit(target: str, **options: Any) -> AuditResult:
    """:func:`privaudit.audit.plugin.audit` (a user's privatizer: conformance checks, then
    every applicable attack beside the built-ins) with the run's outputs written."""
    return audit_cells(target, outputs=write_outputs, **options)


def write_guarantees(frame: Any, rd: RunDir) -> Path:
    """The guarantee audit of every defense point in ``frame`` (at the smaller
    :data:`~privaudit.audit.guarantee_audit.QUICK_SIZES`), written as ``guarantees.csv``."""
    return rd.write_guarantees(to_frame(audit_points(frame, sizes=QUICK_SIZES)))


def write_outputs(frame: Any, rd: RunDir, chance: float) -> tuple[list[Path], list[str], Any]:
    """Per-attack Pareto plots, the combined frontier figure, the leaderboard (from the run
    directory's results and outcomes) with its worst-case family figure, the guarantee audit
    of every defense point (``guarantees.csv``), the attack-strength curve (``strength.png``,
    when the run computed ``strength.csv``) and the HTML report.
    The results are already on disk; one output that cannot be made is recorded (returned,
    and warned about) and every other one is still written, so ``--resume`` can always
    finish. Returns the plots, the problems and the leaderboard (None if it failed)."""
    plots: list[Path] = []
    problems: list[str] = []

    def attempt(what: str, make: Any) -> None:
        try:
            made = make()
        except DiskFull:  # no other output would fit either: stop, say so, resume later
            raise
        except Exception as exc:  # one bad plot must not cost the others
            problems.append(f"{what}: {type(exc).__name__}: {exc}")
            warnings.warn(f"privaudit could not write {problems[-1]}", stacklevel=2)
            return
        plots.extend(made if isinstance(made, list) else [made])

    ok = frame[frame["status"] == "ok"]
    styles = run_styles(frame)  # one colour and marker per defense in every figure
    for attack_name in sorted(ok["attack"].unique()):
        sub, path = ok[ok["attack"] == attack_name], rd.pareto_png(attack_name)
        attempt(
            path.name,
            lambda s=sub, p=path, a=attack_name: (
                plot_pareto(s, p, attack=a, chance=chance, styles=styles) or p
            ),
        )
    boards: list[Any] = []

    def board() -> list[Path]:
        runs = load_runs([rd.path], chance=chance)
        boards.append(runs.board())
        return write_leaderboard(
            boards[0], rd.path, runs.guarantees, frame=runs.frame, strength=runs.strength
        )

    if len(frame):  # before the leaderboard, which shows it
        # a table, not a plot: nothing to list
        attempt(rd.guarantees_csv.name, lambda: write_guarantees(frame, rd) and [])
    if len(ok):
        attempt(
            rd.frontiers_png.name,
            lambda: plot_frontiers(frame, rd.frontiers_png, chance=chance, styles=styles),
        )
        attempt("leaderboard", board)
        if boards and not boards[0].points.empty:
            attempt(
                rd.families_png.name,
                lambda: plot_families(
                    boards[0].points, rd.families_png, chance=chance, styles=styles
                ),
            )
    curve = rd.read_strength()
    if curve is not None and (curve["status"] == "ok").any():
        attempt(rd.strength_png.name, lambda: save_figure(strength_figure(curve), rd.strength_png))
    # The report shows the same leaderboard: computed once (its resampled ranks cost seconds).
    attempt(rd.report_html.name, lambda: write_report(rd.path, board=boards[0] if boards else None))
    return plots, problems, boards[0] if boards else None
