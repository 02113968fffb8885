"""The one compiled part of devtune: the lint fast path's byte and column passes, its per-block
statistics, its duplicate finder and the findings for duplicate pairs (core/data/_fastcols.c,
_fold.c, _dups.c, _pairs.c), one extension.

Everything else is in pyproject.toml. The extension is optional: where no C compiler is present the
build goes on without it and the lint uses the pure-Python column pass (same findings, slower).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("core.data._fastcols", ["core/data/_fastcols.c", "core/data/_dups.c",
                                                          "core/data/_fold.c",
                                                          "core/data/_pairs.c"],
                             optional=True)])
