"""A generative language model a user names (a local directory or a Hugging Face id), loaded
once per process: Hide-and-Seek's optional hide model (``has``'s ``model``). Nothing ships or
downloads here; the offline default of every caller is no model at all."""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def generative_model(name: str) -> tuple[Any, Any, bool]:
    """``(tokenizer, model, is_seq2seq)`` for ``name``, in eval mode; one ``ValueError``
    line with the way out when it cannot be loaded (it is the user's input)."""
    try:
        # lazy imports: transformers loads only when a user names a generative model
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoModelForSeq2SeqLM,
            AutoTokenizer,
        )

        config = AutoConfig.from_pretrained(name)
        seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = auto.from_pretrained(name)
    except Exception as exc:  # any loading failure: user input, so a ValueError with the fix
        raise ValueError(
            f"Cannot load the generative hide model {name!r}: {str(exc).rstrip('.')}. "
            "Give a local model "
            "directory or a Hugging Face id reachable from this machine; the offline default "
            "is model=None (faker surrogate substitution)."
        ) from exc
    model.eval()
    return tokenizer, model, seq2seq
