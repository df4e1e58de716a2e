"""Tree pictures: SVG figures and an HTML page (``parse --format html|svg``, ``show --html``) and arcs drawn in
text for a terminal (``show``).

A layer of its own above :mod:`depinduce.pipeline` and :mod:`depinduce.metrics` (it compares with gold the way
``eval`` aligns tokens) and below :mod:`depinduce.api`, whose :func:`~depinduce.api.parser.write` sends the
picture formats (:data:`depinduce.pipeline.PICTURE_FORMATS`) here and the text formats to :mod:`depinduce.io`.
"""
