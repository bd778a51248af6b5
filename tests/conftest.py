"""Shared fixtures: hermetic cache, offline hub, the tiny random BERT."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# Parallel workers (pytest-xdist, as `make test` runs) split the cores: torch in each takes its
# share, as do the grids its tests run, instead of every worker spinning on every core.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "").isdigit():
    _share = (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _share)))

TINY = "tiny-random-bert"


@pytest.fixture(autouse=True, scope="session")
def _hermetic_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["PRIVAUDIT_CACHE"] = str(tmp_path_factory.mktemp("privaudit-cache"))
    # Each test's grid computes its cells (a test patches what a stored cell would hide);
    # tests/audit/test_cell_store.py turns the cell store on for itself.
    os.environ["PRIVAUDIT_CELL_STORE"] = "off"


@pytest.fixture(scope="session")
def tiny():
    from privaudit.models.backbone import backbone

    return backbone(TINY)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def write_grid(tmp_path: Any, data: dict[str, Any], name: str = "grid.yaml") -> Any:
    """``data`` as a YAML grid config file in ``tmp_path``."""
    import yaml

    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def refused(data: dict[str, Any]) -> str:
    """The one-line message with which ``load_config`` refuses ``data``."""
    from privaudit.audit.config import load_config

    with pytest.raises(ValueError) as info:
        load_config(data)
    return str(info.value)
