"""A made-up attack scored by the made-up lower-is-stronger metric: the toy reader of
``tests/test_contracts.py`` (the released text's tokens taken as the original ones), declared
with another metric. One module; registering it is one line,
``ATTACKS.add_builtin("edit-reader", "tests.made_up.edit_reader:EditReader")``."""

from __future__ import annotations

from typing import ClassVar

from tests.test_contracts import ToyReader


class EditReader(ToyReader):
    """The released text's tokens, scored by token edit distance (made up, for tests)."""

    name: ClassVar[str] = "edit-reader"
    metric: ClassVar[str] = "token_edit_distance"
