"""CPU building blocks shared by the neural backends (StructFormer, UDGN): oneDNN-routed linear maps
(``kernels``), cheap recomputable dropout (``dropout``) and heap control for long training runs (``memory``).

They live here, not in a backend's folder, so that backends never import from one another.
"""
