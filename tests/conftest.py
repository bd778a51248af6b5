"""Shared fixtures: hermetic cache, offline hub, the tiny random BERT."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

TINY = "tiny-random-bert"


@pytest.fixture(autouse=True, scope="session")
def _hermetic_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["PRIVAUDIT_CACHE"] = str(tmp_path_factory.mktemp("privaudit-cache"))


@pytest.fixture(scope="session")
def tiny():
    from privaudit.resources import backbone

    return backbone(TINY)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
