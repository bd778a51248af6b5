"""Adversaries, one module per attack (see ``privaudit list attacks``)."""
