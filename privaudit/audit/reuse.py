"""Cells reused across runs: what a finished cell's result depends on, as the key of the
machine's cell store (:mod:`privaudit.runtime.cell_store`), and the runner's use of it.

A run directory's keys (:func:`privaudit.audit.cells.point_keys`) hash the defense (name,
version, parameters), the corpus's fingerprint (texts and labels), the backbone's
fingerprint, the seed and the component (name, version, parameters). A cell taken from
another run must agree on more, so the store's key adds:

- the corpus's **content** beyond texts and labels: every column of every split
  (attributes, entities, authors), which the truth, the knowledge and the service's
  objectives read;
- the **device's precision** (device kind, torch's float32 matmul precision): a GPU's
  results are not a CPU's bytes;
- the **code**: privaudit's version, the store's record format (:data:`STORE_FORMAT`) and,
  for a component that privaudit does not ship (a plugin, a user's privatizer), a digest of
  its source file, so changing one line of a plugin recomputes its points and nothing else.

The runner asks :meth:`Reuse.take` before computing a cell: a hit is copied into the run
directory with ``"reused": true`` in its record and costs nothing. Every record the run
computes is given to :meth:`Reuse.keep` (never a failed one, never corpus text: examples and
full failure messages are dropped). Utility records are reused like attack cells.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit import __version__
from privaudit.audit.reasons import FULL
from privaudit.registry import load_object
from privaudit.runtime.cell_store import CellStore
from privaudit.runtime.devices import current_device

if TYPE_CHECKING:
    from privaudit.audit.cells import Context
    from privaudit.audit.plan import Point
    from privaudit.audit.store import ResultStore

#: Bumped when the shape of a stored record changes (older entries are then never taken).
STORE_FORMAT = 1
#: What a run keeps of a record it computed: everything but these (corpus text).
NOT_KEPT = ("examples",)
_PACKAGE = Path(__file__).resolve().parents[1]


def content_fingerprint(corpus: Any) -> str:
    """A digest of every column of every split (texts, labels, attributes, entities,
    authors), the label and attribute names: what a cell's truth and knowledge are built
    from. Computed once per run, in the driver."""
    h = hashlib.sha256()
    h.update(json.dumps([corpus.name, corpus.label_names, corpus.attribute_names]).encode())
    for name in sorted(corpus.splits):
        ds = corpus.splits[name]
        h.update(f"\x00{name}\x00".encode())
        for column in sorted(ds.column_names):
            h.update(f"\x01{column}\x01".encode())
            blob = json.dumps(ds[column], sort_keys=True, default=str, ensure_ascii=False)
            h.update(blob.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def precision() -> str:
    """The device kind and torch's float32 matmul precision (torch's default, ``highest``,
    while torch is not loaded: nothing can have changed it)."""

    torch = sys.modules.get("torch")
    matmul = torch.get_float32_matmul_precision() if torch is not None else "highest"
    return f"{current_device().split(':')[0]}/{matmul}"


def code_digest(component: Any) -> str:
    """Empty for a component privaudit ships (its version and privaudit's are in the key); for
    anyone else's (a plugin, a user's privatizer behind the audit wrapper) a digest of its
    class's source file, or of the class's qualified name where there is no file."""
    impl: Any = component
    target = getattr(component, "target", None)
    if isinstance(target, str):  # the audit wrapper: the user's class (imported, not built)
        try:
            impl = load_object(target)
        except Exception:  # it failed its checks earlier, or will fail its cells
            return f"unloadable:{target}"
    cls = impl if isinstance(impl, type) else type(impl)
    source = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if source is None and isinstance(target, str) and target.rpartition(":")[0].endswith(".py"):
        source = str(Path(target.rpartition(":")[0]).expanduser())  # imported from its file
    if source is None:
        with contextlib.suppress(TypeError):
            source = inspect.getsourcefile(cls)
    if source is not None and Path(source).resolve().is_relative_to(_PACKAGE):
        return ""
    if source is None:
        return f"nofile:{cls.__module__}.{cls.__qualname__}"
    try:
        return hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16]
    except OSError:
        return f"unreadable:{source}"


def _kept(record: dict[str, Any]) -> dict[str, Any]:
    """A record as the store keeps it: no examples, no full failure message (corpus text)."""
    out = {k: v for k, v in record.items() if k not in NOT_KEPT and k != "reused"}
    if isinstance(out.get("rows"), list):
        out["rows"] = [{k: v for k, v in row.items() if k != FULL} for row in out["rows"]]
    return out


class Reuse:
    """The runner's view of the cell store for one run: each run key's store key and what to
    show it by, the records taken and kept."""

    def __init__(
        self, corpus: Any, evaluator: Any, attacks: dict[str, Any], store: CellStore | None = None
    ) -> None:
        self.store = store if store is not None else CellStore()
        self.base = [STORE_FORMAT, __version__, content_fingerprint(corpus), precision()]
        self.corpus, self.evaluator = corpus.name, evaluator
        self._keys: dict[str, str] = {}
        self.meta: dict[str, dict[str, Any]] = {}
        self.reused_cells = self.reused_points = 0
        self._evaluator_code = code_digest(evaluator)
        self._attack_code = {label: code_digest(a) for label, a in attacks.items()}
        self._defense_code: dict[Any, str] = {}

    @classmethod
    def of_run(cls, ctx: Context, points: list[Point]) -> Reuse:
        """The run's view: every point's and cell's store key."""
        reuse = cls(ctx.corpus, ctx.evaluator, ctx.attacks)
        for point in points:
            point_key, cells = ctx.keys(point)
            reuse.add(point_key, cells, ctx.defense(point), point.label, point.knob_value)
        return reuse

    def add(
        self,
        point_key: str,
        cells: dict[str, str],
        defense: Any,
        label: str,
        knob_value: float | None,
    ) -> None:
        """A point's run keys (its utility's, and its cells' by attack label)."""
        # one digest per class (per user's class behind the audit wrapper)
        which = getattr(defense, "target", None) or type(defense)
        code = self._defense_code.get(which)
        if code is None:
            code = self._defense_code[which] = code_digest(defense)
        shown = label + ("" if knob_value is None else f" {knob_value:g}")
        common = {"corpus": self.corpus, "defense": shown}
        self._add(
            point_key,
            [code, self._evaluator_code],
            common | {"component": f"utility:{self.evaluator.name}"},
        )
        for name, key in cells.items():
            self._add(key, [code, self._attack_code[name]], common | {"component": name})

    def has(self, run_key: str) -> bool:
        """Whether the store holds ``run_key``'s record (nothing is copied)."""
        key = self._keys.get(run_key)
        return key is not None and self.store.get(key, touch=False) is not None

    def _add(self, run_key: str, code: list[str], meta: dict[str, Any]) -> None:
        blob = json.dumps(["cell-store", run_key, *self.base, *code], default=str).encode()
        self._keys[run_key] = hashlib.sha256(blob).hexdigest()[:40]
        self.meta[run_key] = meta

    def take(self, run_store: ResultStore, run_key: str) -> dict[str, Any] | None:
        """The stored record of ``run_key``, copied into ``run_store`` (marked ``reused``), or
        None: the run computes it."""
        key = self._keys.get(run_key)
        record = self.store.get(key) if key is not None else None
        if record is None:
            return None
        record = record | {"reused": True}
        run_store.put(run_key, record)
        if record.get("kind") == "point":
            self.reused_points += 1
        else:
            self.reused_cells += 1
        return record

    def keep(self, run_key: str, record: dict[str, Any]) -> None:
        """Keep a record this run computed (failed ones are not kept; a cache that cannot be
        written keeps nothing, silently: the run does not depend on it)."""
        key = self._keys.get(run_key)
        if key is None or record.get("reused") or record.get("status") == "failed":
            return
        self.store.put(key, _kept(record), self.meta.get(run_key))

    def line(self, cells: int, points: int) -> str:
        """``N of M cells reused from the cell store`` (and the points' utility records)."""
        return (
            f"privaudit: {self.reused_cells} of {cells} cells reused from the cell store "
            f"({self.reused_points} of {points} points' utility; `privaudit cache` shows it, "
            "--fresh recomputes)"
        )
