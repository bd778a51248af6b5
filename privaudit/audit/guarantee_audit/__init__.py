"""The guarantee audit: an empirical lower bound on every stated privacy guarantee.

A defense states a formal guarantee (:class:`privaudit.guarantees.Guarantee`: η·d_X per
token, ε-LDP per coordinate, ...). This package checks it the way DP claims of machine-learning
training are audited (Jagielski et al. 2020; Nasr et al. 2021): pairs of inputs that differ in
one protected unit at a known distance d, the public mechanism run n times on each, an output
event chosen on separate draws, its probabilities bounded on fresh draws (Clopper–Pearson),
and the lower bound ln(p_low / q_high) on the privacy loss compared with the claim's
``loss(d)``; above it at confidence 1 − α, the claim is **violated**.

- :mod:`.stats` — holdout event selection, the exact bounds, the Bonferroni correction, what
  a sample can show (the ceiling: a claim above it is "untestable"), independence and scale;
- :mod:`.dx` — d_X-privacy: word/token releases, vector releases, the noise step, pair search;
- :mod:`.ldp` — ε-LDP on [0,1]-normalised pooled vectors (Laplace): per coordinate, whole
  vector, batch of two;
- :mod:`.core` — which tests a defense gets, :func:`audit_guarantee` (one defense at one
  level) and the table (:func:`to_frame`);
- :mod:`.levels` — a defense at its levels (:func:`audit_levels`), every built-in
  (:func:`audit_builtins`), a results table's points (:func:`audit_points`).
"""

from privaudit.audit.guarantee_audit.core import (
    COLUMNS,
    HOLDS,
    NO_CLAIM,
    NOT_TESTED,
    QUICK_SIZES,
    UNTESTABLE,
    VIOLATED,
    GuaranteeAudit,
    Sizes,
    audit_guarantee,
    to_frame,
)
from privaudit.audit.guarantee_audit.levels import audit_builtins, audit_levels, audit_points
from privaudit.audit.guarantee_audit.stats import Evidence

__all__ = [
    "COLUMNS",
    "HOLDS",
    "NOT_TESTED",
    "NO_CLAIM",
    "QUICK_SIZES",
    "UNTESTABLE",
    "VIOLATED",
    "Evidence",
    "GuaranteeAudit",
    "Sizes",
    "audit_builtins",
    "audit_guarantee",
    "audit_levels",
    "audit_points",
    "to_frame",
]
