"""Stepwise: step-level human feedback on model-written math solutions."""
