"""Maximum spanning arborescence with exactly one word attached to ROOT (Chu-Liu/Edmonds).

Score matrices follow the package convention: ``scores[d, h]`` is the score of word ``d`` taking ``h`` as its
head, for an (n+1)x(n+1) matrix whose row 0 is ignored and column 0 is ROOT; the diagonal is never an arc.

How it works, and why it is fast in pure Python + numpy at 10-200 words
------------------------------------------------------------------------
Every word first takes its best head (one ``argmax`` over the matrix).  Walking the head pointers (with a
"reaches ROOT" mark that contraction never invalidates, so the walks are linear overall) finds each cycle,
which is contracted into a new node.  Columns are never merged: every head stays an original word, and a
union-find maps it to the node now containing it.  The new node gets a single row vector,
``max over members m of (row(m) - score of m's cycle arc)`` with its own words set to -inf: the classic
Edmonds re-weighting, where entering the cycle at m costs exactly m's broken cycle arc.  A contraction is
therefore a couple of vector operations on rows of length n+1, never a pass over the matrix, and rows are
all that the rest of the algorithm reads.  Random score matrices contract one growing node over and over
(about n/5 nested contractions), which is what this layout makes cheap.  Expansion walks the contractions
newest first: entering a contracted node from head y enters the member whose row gives the best re-weighted
score for y (that is how the merged row was built), and every other member keeps its cycle arc.

The single-root constraint (Zmigrod, Vieira & Cotterell 2020, "Please Mind the Root", after Gabow & Tarjan
1984)
-----------------------------------------------------------------------------------------------------------
Once no cycle is left, the greedy graph is the best arborescence *without* the constraint.  While ROOT has
several children there, the root arc that is cheapest to give up (``score(ROOT -> x) - best other arc into
x``, in the contracted graph) is swapped for x's best other arc.  The root arc itself stays in the graph: if
the swap closes a cycle (necessarily through x) the cycle is contracted as above, and the new node's best
arc is a root arc again (x's re-weighted root arc scores >= 0, every other entry <= 0), so the contraction
decides which cycle arc to give up instead.  Each swap removes a root child or a node, so this ends with
exactly one root arc; rows never change once built, so each node's swap cost is computed once and the
cheapest is taken from a heap (500 words that all prefer ROOT decode in a few milliseconds).  Why it is optimal: arborescences are the common bases of two matroids, and Gabow &
Tarjan's exchange argument for root-degree constraints shows that a best tree with k-1 root arcs is reached
from a best tree with k root arcs by the cheapest exchange of one root arc; in the contracted graph that
exchange is exactly the swap above.  Contraction keeps the optimum, because the trees of the contracted graph
correspond one to one, with scores equal up to a constant, to the trees of the original graph that keep all
but one arc of the cycle, root arcs mapped to root arcs.  (Deleting the root arc outright instead of swapping
is wrong: the tests found 5-word counterexamples against brute force.)  Unlike the "subtract a large
constant from every root score" trick there is no big constant and no rounding problem; the tests check
optimality against brute-force enumeration of all trees.

Forbidden arcs (``-inf``) are replaced by a finite value so low that one forbidden arc costs more than the
whole spread of the allowed scores of a tree (``min - (n * (max - min) + 1)``): the decoder then returns the
best tree among those with the fewest forbidden arcs, so a forbidden arc is used only when every tree needs
one.  NaN and +inf are rejected.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

_NEG = -np.inf


def chu_liu_edmonds(scores: Any, *, single_root: bool = True) -> list[int]:
    """Heads (1-based, 0 = ROOT) of the best single-rooted spanning tree for an (n+1)x(n+1) score matrix
    (``single_root=False``: the best spanning tree, any number of words on ROOT).

    ``scores`` may be a torch tensor, a numpy array or nested lists; it is never modified.
    """
    S = _prepare(scores)
    N = S.shape[0]
    if N <= 2:
        return [0] * (N - 1)
    return _maximum_tree(S, single_root)


def root_retry_tree(scores: Any) -> list[int]:
    """Dozat & Manning's one-root rule, as biaffine parsers' code (RNGTr's among them) decodes: the best tree
    without the root constraint; if several words hang on ROOT there, each of them in turn (left to right) is
    made the only root and the best of those trees wins (the first on ties).

    Often called a heuristic, it is exact: by the exchange argument above, a best single-rooted tree keeps one
    of the unconstrained best tree's root arcs, so it scores what :func:`chu_liu_edmonds` scores (the tests
    check this); the two can differ only between equally good trees.  Kept to reproduce such code's choices.
    """
    S = _prepare(scores)
    N = S.shape[0]
    if N <= 2:
        return [0] * (N - 1)
    tree = _maximum_tree(S.copy(), False)
    roots = [d + 1 for d, h in enumerate(tree) if h == 0]
    if len(roots) == 1:
        return tree
    best_score, best_tree = -np.inf, tree
    rows = np.arange(1, N)
    for root in roots:
        only = S.copy()
        only[1:, 0] = _NEG
        only[root, 0] = S[root, 0]
        candidate = _maximum_tree(only, True)
        score = float(S[rows, candidate].sum())
        if score > best_score:
            best_score, best_tree = score, candidate
    return best_tree


def _prepare(scores: Any) -> np.ndarray:
    """A float64 working copy: diagonal -inf, -inf replaced by a finite "forbidden" score, input validated.

    Row 0 is left as it is: nothing downstream reads it.
    """
    if hasattr(scores, "detach"):  # torch tensor: avoid importing torch here
        scores = scores.detach().cpu().numpy()
    S = np.array(scores, dtype=np.float64, order="C")
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] == 0:
        raise ValueError(f"expected an (n+1)x(n+1) score matrix, got shape {tuple(S.shape)}")
    N = S.shape[0]
    if N == 1:
        return S
    diagonal = S.reshape(-1)[:: N + 1]
    diagonal[:] = 0.0  # neutral while validating; it only widens the score range used below
    body = S[1:]
    if not math.isfinite(body.sum()):  # one reduction in the common case; look closer only when needed
        top, low = body.max(), body.min()
        if not top < np.inf:
            raise ValueError("score matrix contains NaN or +inf")
        if low == _NEG:  # forbidden arcs: finite, but one costs more than the spread of any tree's other arcs
            low = body.min(where=body > _NEG, initial=top)
            np.maximum(body, low - ((N - 1) * (top - low) + 1.0), out=body)
    diagonal[:] = _NEG
    return S


def _maximum_tree(S: np.ndarray, single_root: bool = True) -> list[int]:
    """The algorithm on a prepared matrix (n >= 2), written flat because every call counts at 25 words.

    Nodes are ids: 0..n are ROOT and the words, and contraction k adds node N + k.  Columns are never merged:
    every head is an original word and ``find`` maps it to the node that now contains it.  A contracted node
    keeps one row vector, the best re-weighted score of entering it from each original head (its own words set
    to -inf); a word's row is its row of ``S``.  ``head[x]``/``value[x]`` are node x's chosen arc and its score
    in x's row.
    """
    N = S.shape[0]
    best = S.argmax(axis=1)
    head: list[int] = best.tolist()
    head[0] = 0
    value: list[float] = S[np.arange(N), best].tolist()
    top = list(range(N))  # union-find over node ids; top[x] == x for the nodes of the current graph
    contracted_rows: list[np.ndarray] = []
    words_of: list[list[int]] = []
    cycles: list[list[int]] = []

    def find(x: int) -> int:
        root = x
        while top[root] != root:
            root = top[root]
        while top[x] != root:
            top[x], x = root, top[x]
        return root

    def contract(cycle: list[int]) -> int:
        """Merge the cycle into a new node whose row is the best re-weighted way into any member."""
        new = len(head)
        v = cycle[0]
        merged = (S[v] if v < N else contracted_rows[v - N]) - value[v]
        inside = [v] if v < N else words_of[v - N][:]
        top[v] = new
        for v in cycle[1:]:
            np.maximum(merged, (S[v] if v < N else contracted_rows[v - N]) - value[v], out=merged)
            if v < N:
                inside.append(v)
            else:
                inside += words_of[v - N]
            top[v] = new
        if len(inside) > 8:
            merged[inside] = _NEG
        else:  # item assignment beats building an index array for the usual small cycles
            for w in inside:
                merged[w] = _NEG
        best = int(merged.argmax())
        top.append(new)
        contracted_rows.append(merged)
        words_of.append(inside)
        cycles.append(cycle)
        head.append(best)
        value.append(float(merged[best]))
        return new

    def cycle_through(x: int) -> list[int] | None:
        """The cycle closed by changing x's head, if any (everything else is acyclic)."""
        cycle = [x]
        y = find(head[x])
        while y != 0 and y != x:
            cycle.append(y)
            y = find(head[y])
        return cycle if y == x else None

    # 1. Contract every cycle of the greedy graph: walk head pointers, keeping the path on a stack.  A node
    #    known to reach ROOT stays so (a contraction only swallows nodes that do not), so walks are linear.
    done = [False] * (2 * N)  # at most N - 2 contractions add ids
    done[0] = True
    on_path = [False] * (2 * N)
    for start in range(1, N):
        if done[start] or top[start] != start:
            continue
        path: list[int] = []
        x = start
        while not done[x]:
            if on_path[x]:
                at = path.index(x)
                cycle = path[at:]
                del path[at:]
                x = contract(cycle)
                continue
            on_path[x] = True
            path.append(x)
            x = head[x]
            if top[x] != x:
                x = find(x)
        for v in path:
            done[v] = True

    # 2. Single root: swap the root arc that is cheapest to give up for that node's best other arc, contract
    #    the cycle the swap may close (its new node's best arc is a root arc again), until one root arc is left.
    #    A node's rows never change, so its swap cost is computed once and kept in a heap.
    def swap_cost(x: int) -> tuple[float, int]:
        row = S[x] if x < N else contracted_rows[x - N]
        return value[x] - float(row[1 + int(row[1:].argmax())]), x

    roots = [swap_cost(x) for x in range(1, len(head)) if head[x] == 0 and top[x] == x] if single_root else []
    root_count = len(roots)
    heapq.heapify(roots)
    while root_count > 1:
        _, x = heapq.heappop(roots)
        if top[x] != x or head[x] != 0:
            continue
        row = S[x] if x < N else contracted_rows[x - N]
        head[x] = 1 + int(row[1:].argmax())
        value[x] = float(row[head[x]])
        root_count -= 1
        cycle = cycle_through(x)
        while cycle is not None:
            x = contract(cycle)
            cycle = cycle_through(x)
        if head[x] == 0:  # the swap closed a cycle whose new node went back to ROOT
            root_count += 1
            heapq.heappush(roots, swap_cost(x))

    # 3. Expand, newest contraction first: entering node N + k from head y enters the member whose row gives
    #    the best re-weighted score for y (that is how the merged row was built); the other members keep
    #    their cycle arcs.
    entering = head[:]
    for k in range(len(cycles) - 1, -1, -1):
        y = entering[N + k]
        cycle = cycles[k]
        best_score, member = _NEG, cycle[0]
        for v in cycle:
            score = (S[v, y] if v < N else contracted_rows[v - N][y]) - value[v]
            if score > best_score:
                best_score, member = score, v
            entering[v] = head[v]
        entering[member] = y
    return entering[1:N]
