"""Data for core.diagnose: the failure rules (rules.py)."""
