"""The ``train`` settings of a recipe as pydantic models, one per concern (budget, batches, optimiser, …).

Recipes, ``--set`` and ``config.yaml`` keep writing the flat keys (``lr``, ``epochs``); each flat key belongs to
exactly one group (:data:`depinduce.training.settings.groups.GROUP_OF`), and the code reads them by concern
(``cfg.optimiser.lr``).  The grouping is documented in ``docs/guide/train.md``.
"""
