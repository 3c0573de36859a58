"""Prose builders: the sentences and markdown tables the notebooks print, kept apart from the
compute that produces the numbers (each takes numbers or frozen results, returns a string)."""

from __future__ import annotations

# ---------------------------------------------------------------- shared: tables and intervals

# ---------------------------------------------------------------- 01 forced memorization, 02 gradients

# ---------------------------------------------------------------- 03 LiRA

# ---------------------------------------------------------------- 04 theory

# ---------------------------------------------------------------- 05 mitigation
