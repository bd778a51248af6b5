"""Content-keyed memoisation of the costly pure computations, and the shared plain-prefix rule."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.api import Release
from privaudit.mechanisms import NearestNeighbourIndex
from privaudit.runtime import memo as memo_module
from privaudit.runtime.memo import ContentMemo, charged_seconds, digest
from privaudit.utility.probe import Probe
from tests.conftest import TINY


def test_digest_tells_content_dtype_and_shape_apart() -> None:
    a = np.arange(6, dtype=np.float32)
    assert digest([a]) == digest([a.copy()])
    assert digest([a]) != digest([a.astype(np.float64)])
    assert digest([a]) != digest([a.reshape(2, 3)])
    b = a.copy()
    b[3] += 1e-6
    assert digest([a]) != digest([b])
    # Strings are length-prefixed: ["ab", "c"] and ["a", "bc"] differ.
    assert digest(["ab", "c"]) != digest(["a", "bc"])
    assert digest(["x", 1]) != digest(["x", "1"])
    # Non-contiguous views hash by content.
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert digest([m[:, ::2]]) == digest([np.ascontiguousarray(m[:, ::2])])


def test_memo_hits_return_copies_and_evict_least_recent() -> None:
    memo = ContentMemo(size=2)
    calls: list[str] = []

    def make(key: str) -> np.ndarray:
        calls.append(key)
        return np.full(3, len(calls), dtype=np.float32)

    first = memo.get("a", lambda: make("a"))
    first[:] = -1  # a caller writing into its result must not change the next caller's
    again = memo.get("a", lambda: make("a"))
    assert calls == ["a"] and (again == 1).all() and (memo.hits, memo.misses) == (1, 1)
    memo.get("b", lambda: make("b"))
    memo.get("a", lambda: make("a"))  # "a" is now the most recent; "b" goes first
    memo.get("c", lambda: make("c"))
    memo.get("a", lambda: make("a"))
    assert calls == ["a", "b", "c"]
    memo.get("b", lambda: make("b"))
    assert calls == ["a", "b", "c", "b"]


def test_memo_rejects_a_zero_size() -> None:
    with pytest.raises(ValueError, match="at least one entry"):
        ContentMemo(size=0)


def test_nearest_query_is_memoised_by_content() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(50, 8)).astype(np.float32)
    index = NearestNeighbourIndex(matrix)
    q = rng.normal(size=(20, 8)).astype(np.float32)
    brute = np.argmin(((q[:, None, :] - matrix[None]) ** 2).sum(-1), axis=1)
    first = index.query(q)
    np.testing.assert_array_equal(first, brute)
    first[:] = 0
    np.testing.assert_array_equal(index.query(q.copy()), brute)  # a hit, and not the edited one
    assert index._memo.hits == 1
    q2 = q.copy()
    q2[0] = matrix[7]
    assert index.query(q2)[0] == 7  # new content, new answer
    assert index._memo.misses == 2


def test_pooled_is_memoised_and_equal_to_a_fresh_encoding(tiny) -> None:
    texts = ["a memo test sentence", "another one, longer than the first"]
    fresh = tiny._pooled(texts, 128, 64, False)
    before = tiny._pooled_memo.hits
    first = tiny.pooled(texts)
    np.testing.assert_array_equal(first, fresh)
    first[:] = 0
    np.testing.assert_array_equal(tiny.pooled(list(texts)), fresh)
    assert tiny._pooled_memo.hits == before + 1
    # A different max_length is a different question.
    tiny.pooled(texts, max_length=4)
    assert tiny._pooled_memo.hits == before + 1
    assert tiny.pooled([]).shape == (0, tiny.dim)


def test_content_texts_skips_the_public_plain_prefix() -> None:
    release = Release("text", texts=["p1 p2 real words", "p1 p2 more"], plain_prefix=2)
    assert release.content_texts() == ["real words", "more"]
    assert Release("text", texts=["as is"]).content_texts() == ["as is"]
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="plain_prefix"):
            Release("text", texts=["x"], plain_prefix=bad)
    with pytest.raises(ValueError, match="no texts"):
        Release("pooled_vectors", vectors=[np.zeros(3)]).content_texts()


def test_probe_encodes_a_release_without_its_plain_prefix() -> None:
    probe = Probe(backbone=TINY)
    prefixed = Release("text", texts=["alpha beta the film was good"], plain_prefix=2)
    plain = Release("text", texts=["the film was good"])
    np.testing.assert_allclose(probe.features(prefixed), probe.features(plain))


# --- charged cost: what a memo hit saved is charged to the point that used it (item 6e) -------


class _Clock:
    """A fake ``time`` for the memo: ``perf_counter`` returns ``now``, advanced by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(memo_module, "time", fake)
    return fake


def _costly(clock: _Clock, seconds: float, value: float = 1.0):
    def compute() -> np.ndarray:
        clock.now += seconds
        return np.full(2, value)

    return compute


def test_a_hit_inside_the_block_charges_the_miss_compute_time(clock: _Clock) -> None:
    memo = ContentMemo()
    with charged_seconds() as first:
        memo.get("enc", _costly(clock, 18.0))  # a miss: its time is measured, not charged
    assert (first.seconds, first.hits) == (0.0, 0)
    assert memo.seconds("enc") == 18.0 and memo.seconds("other") is None
    with charged_seconds() as second:
        clock.now += 0.016
        memo.get("enc", _costly(clock, 18.0))  # a hit: charged what the miss took
        memo.get("enc", _costly(clock, 18.0))
    assert (second.seconds, second.hits) == (36.0, 2)


def test_nothing_is_charged_outside_a_block(clock: _Clock) -> None:
    memo = ContentMemo()
    memo.get("a", _costly(clock, 5.0))
    memo.get("a", _costly(clock, 5.0))  # a hit with no block open: charged to nobody
    with charged_seconds() as block:
        pass
    memo.get("a", _costly(clock, 5.0))  # after the block: not its hit
    assert (block.seconds, block.hits) == (0.0, 0)
    assert memo_module._open_charges == []


def test_nested_blocks_each_see_the_hits_inside_them(clock: _Clock) -> None:
    one, two = ContentMemo(), ContentMemo()
    one.get("a", _costly(clock, 2.0))
    two.get("b", _costly(clock, 3.0))
    with charged_seconds() as outer:
        one.get("a", _costly(clock, 2.0))
        with charged_seconds() as inner:
            two.get("b", _costly(clock, 3.0))  # any memo's hit counts
        with pytest.raises(RuntimeError), charged_seconds() as failed:
            one.get("a", _costly(clock, 2.0))
            raise RuntimeError  # a block left by an exception is closed all the same
    assert (inner.seconds, inner.hits) == (3.0, 1)
    assert (failed.seconds, failed.hits) == (2.0, 1)
    assert (outer.seconds, outer.hits) == (7.0, 3)
    assert memo_module._open_charges == []


def test_an_entry_built_on_a_hit_stores_the_full_cost(clock: _Clock) -> None:
    base, derived = ContentMemo(), ContentMemo()
    base.get("enc", _costly(clock, 18.0))

    def on_top() -> np.ndarray:
        clock.now += 1.0
        return base.get("enc", _costly(clock, 18.0)) + 1  # a hit: 18 s saved

    with charged_seconds() as block:
        derived.get("noised", on_top)
    assert block.seconds == 18.0  # the inner hit, charged to the open block
    assert derived.seconds("noised") == 19.0  # 1 s measured + 18 s it reused
    with charged_seconds() as later:
        derived.get("noised", on_top)
    assert later.seconds == 19.0


def test_every_cape_level_is_charged_its_encoding(tiny) -> None:
    from privaudit.registry import DEFENSES

    texts = [f"a charged-cost sentence number {i}" for i in range(6)]
    cape = DEFENSES.get("cape")(backbone=TINY, epsilon=3.0)
    with charged_seconds() as first:
        cape.privatize(texts, rng=np.random.default_rng(0))
    with charged_seconds() as second:
        cape.with_knob(10.0).privatize(texts, rng=np.random.default_rng(0))
    assert (first.hits, first.seconds) == (0, 0.0)  # it encoded them: measured wall time
    assert second.hits == 1 and second.seconds > 0.0  # it reused them: charged the encoding


def test_row_memo_answers_a_subset_and_charges_its_share(clock: _Clock) -> None:
    """A call whose items all sit in an earlier call's is answered from its rows (a copy, in
    the asked order), charging open blocks the rows' share of that computation; an item it
    never saw, another scope or a bypass finds nothing."""
    rows = memo_module.RowMemo(size=2)
    rows.store("s", ["a", "b", "c", "d"], np.arange(8.0).reshape(4, 2), seconds=8.0)
    with charged_seconds() as block:
        got = rows.lookup("s", ["c", "a"])
    assert got is not None
    np.testing.assert_array_equal(got, [[4.0, 5.0], [0.0, 1.0]])
    assert block.seconds == pytest.approx(4.0)  # 2 of 4 rows of an 8 s computation
    got[:] = -1
    np.testing.assert_array_equal(rows.lookup("s", ["c"]), [[4.0, 5.0]])
    assert rows.lookup("s", ["a", "zzz"]) is None
    assert rows.lookup("other", ["a"]) is None
    assert rows.lookup("s", []) is None
    with memo_module.memo_bypassed():
        assert rows.lookup("s", ["a"]) is None
        rows.store("s", ["x"], np.zeros((1, 2)), seconds=1.0)
    assert rows.lookup("s", ["x"]) is None  # nothing stored inside a bypass
    rows.store("s", ["e"], np.ones((1, 2)), seconds=1.0)
    rows.store("s", ["f"], np.ones((1, 2)), seconds=1.0)
    assert rows.lookup("s", ["a"]) is None  # the oldest entry left (size 2)
    rows.store("s", ["g"], np.full((1, 2), 2.0), seconds=1.0)
    assert rows.lookup("s", ["f"]) is not None and rows.lookup("s", ["e"]) is None
    np.testing.assert_array_equal(rows.lookup("s", ["g"]), [[2.0, 2.0]])  # no entry overwritten
    with pytest.raises(ValueError, match="at least one entry"):
        memo_module.RowMemo(size=0)


def test_pooled_of_a_subset_reads_the_rows_of_the_full_encoding(tiny) -> None:
    """An attack scoring 2 of 3 victims reads the pooled rows the full encoding (or the
    service's remembered pass) computed: equal to a fresh encoding within float rounding."""
    texts = ["row memo one", "row memo two, a longer sentence than the first", "three"]
    full = tiny.pooled(texts)
    fresh = tiny._pooled([texts[2], texts[0]], 128, 64, False)
    calls = tiny._pooled_memo.misses
    sub = tiny.pooled([texts[2], texts[0]])
    np.testing.assert_allclose(sub, fresh, atol=1e-5)
    np.testing.assert_array_equal(sub, full[[2, 0]])
    assert tiny._pooled_memo.misses == calls + 1  # a new key, answered from the rows
    remembered = np.full((2, tiny.dim), 7.0, np.float32)
    tiny.remember_pooled(["said once", "said twice"], remembered)
    np.testing.assert_array_equal(tiny.pooled(["said twice"]), remembered[:1])
