"""``--decoder``: the shared decoders and every backend's own (the authors'), listed when help is shown."""

from __future__ import annotations

import click

from depinduce.errors import DepinduceError
from depinduce.models.registry import registrations
from depinduce.structures.decode import DECODERS


def own_decoders_by_backend() -> dict[str, dict[str, str]]:
    """Backend name -> {decoder name: description} for every registered backend that has its own decoders
    (a backend that fails to load is left out; `depinduce models` reports it)."""
    out: dict[str, dict[str, str]] = {}
    for name, reg in registrations().items():
        try:
            cls = reg.load_class()
        except DepinduceError:
            continue
        if cls.own_decoders:
            out[name] = {k: d.description for k, d in cls.own_decoders.items()}
    return out


class DecoderOption(click.Option):
    """A ``--decoder NAME`` option whose help ends with each backend's own decoders, read from the registry only
    when help is printed (loading every backend on each command would cost time for nothing).  The name is
    checked against the loaded model (``parsing.check_request``), which knows which decoders apply."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("metavar", "NAME")
        super().__init__(*args, **kwargs)
        self._lead = self.help or ""

    def get_help_record(self, ctx: click.Context):
        own = own_decoders_by_backend()
        listed = "; ".join(f"{backend}: {', '.join(names)}" for backend, names in own.items())
        self.help = (f"{self._lead} Shared: {', '.join(DECODERS)}."
                     + (f" The authors' decoders, per backend — {listed}." if listed else ""))
        return super().get_help_record(ctx)
