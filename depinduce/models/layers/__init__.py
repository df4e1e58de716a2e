"""CPU building blocks shared by the neural backends (StructFormer, UDGN): oneDNN-routed linear maps
(``kernels``), the output layer and its cross-entropy in one pass (``output_loss``; every language-model
backend), cheap recomputable dropout (``dropout``) and heap control for long training runs (``memory``).

They live here, not in a backend's folder, so that backends never import from one another.
"""
