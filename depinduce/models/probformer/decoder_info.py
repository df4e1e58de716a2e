"""The Probabilistic Transformer's own (the authors') decoders by name and one-line description, without torch:
the ``depinduce.decoders`` entry point that ``--help`` reads without loading the model; :mod:`.decoders`
implements them.  Their texts say how ROOT is scored, which depends on whether the model has a ROOT node."""

from __future__ import annotations


def descriptions(*, root_node: bool) -> dict[str, str]:
    """Name -> description of the authors' three decoders for a model with or without the ROOT node."""
    root = "the ROOT marginal" if root_node else "ROOT at probability 0"
    return {
        "probformer-argmax": "the authors' default (evaluate.py 'argmax'): each word's most probable head"
                             + (" (ROOT included); not a tree" if root_node
                                else " among the words, never ROOT; not a tree"),
        "probformer-nonprojective": f"the authors' 'nonprojective': Chu-Liu/Edmonds over head probabilities (not "
                                    f"logs), {root}, with root reweighting (ROOT arcs lowered by 1 + n·(max − "
                                    "min)): the best single-rooted tree",
        "probformer-projective": f"the authors' 'projective': Eisner with one root over head probabilities (not "
                                 f"logs), {root}",
    }


# The backend class's (a model without the ROOT node, the default); a model with one describes its own.
DECODERS: dict[str, str] = descriptions(root_node=False)
