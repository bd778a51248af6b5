"""Downstream-utility evaluators (see ``privaudit list utility``)."""
