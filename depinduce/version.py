"""depinduce's version, on the ground floor so that any layer may record it (a run's manifest, a dataset's, the
report's score cache) without importing the package root.

The one source of truth: pyproject.toml reads it from here (``[tool.setuptools.dynamic]``), so a release changes
this line only.
"""

__version__ = "0.1.0"
