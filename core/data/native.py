"""The lint's one compiled extension, `_fastcols` (core/data/_fastcols.c, _fold.c, _dups.c,
_pairs.c, built by setup.py with the editable install), or None where no C compiler was found: every
caller then runs its Python/numpy form, with the same results. Each caller keeps its own `USE_C` switch,
which the tests turn off to compare the two forms."""

try:
    from core.data import _fastcols as fastcols
except ImportError:
    fastcols = None
