"""The built-in families and metrics, registered once (imported by the registry's first use)."""

from __future__ import annotations

from privaudit.metrics.attributes import ATTRIBUTE_ACCURACY, PERSON_ATTRIBUTE_ACCURACY
from privaudit.metrics.entities import ENTITY_F1, TEXT_SIMILARITY
from privaudit.metrics.identity import REIDENTIFICATION_ACCURACY
from privaudit.metrics.spec import FamilySpec, register_family, register_metric
from privaudit.metrics.tokens import EMBEDDING_MSE, TOKEN_F1, TOKEN_RECOVERY
from privaudit.metrics.words import GENERATION_F1, WORD_SET_F1

TEXT = register_family(FamilySpec("text", "token and text recovery"))
ENTITY = register_family(FamilySpec("entity", "recovery of the victims' named entities"))
ATTRIBUTE = register_family(
    FamilySpec("attribute", "inference of a private attribute", per_target=True)
)
IDENTITY = register_family(FamilySpec("identity", "re-identification of the victims' authors"))

for _spec in (
    TOKEN_RECOVERY,
    TOKEN_F1,
    EMBEDDING_MSE,
    ENTITY_F1,
    TEXT_SIMILARITY,
    ATTRIBUTE_ACCURACY,
    WORD_SET_F1,
    GENERATION_F1,
    REIDENTIFICATION_ACCURACY,
    PERSON_ATTRIBUTE_ACCURACY,
):
    register_metric(_spec)
