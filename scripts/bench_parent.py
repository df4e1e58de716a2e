"""StructFormer's parent distribution alone: the O(n³) implementation against a dense O(n⁴) contraction
(forward + backward), the cost that dominates the authors' code (prints its figures; not a test).

    python scripts/bench_parent.py --threads 2
"""

from __future__ import annotations

import argparse
import json
import time


def parent_only(threads: int) -> None:
    """Time the O(n³) parent distribution (forward + backward) against a dense O(n⁴) contraction."""
    import torch

    from depinduce.models.structformer.parent import parent_distribution, span_boundaries
    from depinduce.models.structformer.parser import BIG

    torch.set_num_threads(threads)
    for width in (20, 40, 60):
        batch = 4096 // width
        mask = torch.ones(batch, width, dtype=torch.bool)
        distance = torch.randn(batch, width).index_fill_(1, torch.tensor([width - 1]), BIG).requires_grad_()
        height = torch.randn(batch, width, requires_grad=True)
        s = torch.ones(())

        def fast() -> None:
            parent, root = parent_distribution(distance, height, mask, s, s)
            (parent.sum() + root.sum()).backward()

        def dense() -> None:
            p_left, p_right = span_boundaries(distance.double(), height.double(), s.double())
            index = torch.arange(width)
            inside = (index[:, None, None] <= index[None, None, :]) & (index[None, None, :] <= index[None, :, None])
            logits = height.double()[:, None, None, :].masked_fill(~inside, -1e9)
            parent = torch.einsum("bil,bir,blrj->bij", p_left, p_right, logits.softmax(-1))
            parent.sum().backward()

        row = {"width": width, "batch": batch}
        for label, fn in (("fast_ms", fast), ("dense_ms", dense)):
            fn()
            start = time.perf_counter()
            for _ in range(3):
                fn()
            row[label] = round((time.perf_counter() - start) / 3 * 1000, 1)
        print(json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parent_only(parser.parse_args().threads)


if __name__ == "__main__":
    main()
