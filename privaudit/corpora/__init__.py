"""Corpora: the :class:`~privaudit.corpora.base.Corpus` container and its loaders.

- ``synthetic``: the offline, seeded default corpus ``synthetic-reviews``;
- ``synthpai``: SynthPAI's profiled comments, shipped in ``privaudit/data/synthpai`` (``synthpai``);
- ``files``: bring-your-own corpora from csv/tsv/jsonl/json/parquet files (``file``) or the
  Hugging Face Hub (``hf``).

Nothing is imported here so that listing corpora stays cheap; loaders import their modules lazily
through :data:`privaudit.registry.CORPORA`.
"""
