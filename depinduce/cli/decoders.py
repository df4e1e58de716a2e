"""``--decoder``: the shared decoders and every backend's own (the authors'), listed when help is shown."""

from __future__ import annotations

import click

from depinduce.api.choices import DECODERS, declared_decoders


class DecoderOption(click.Option):
    """A ``--decoder NAME`` option whose help ends with each backend's own decoders, read when help is printed
    from the registry's light metadata (``depinduce.decoders``), never from the backends, whose import (torch)
    would make help take seconds.  A backend that declares no metadata is not listed; the name is checked
    against the loaded model (``pipeline.check_request``), which knows which decoders apply."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("metavar", "NAME")
        super().__init__(*args, **kwargs)
        self._lead = self.help or ""

    def get_help_record(self, ctx: click.Context):
        own = declared_decoders()
        listed = "; ".join(f"{backend}: {', '.join(names)}" for backend, names in own.items())
        self.help = (f"{self._lead} Shared: {', '.join(DECODERS)}."
                     + (f" The authors' decoders, per backend — {listed}." if listed else ""))
        return super().get_help_record(ctx)
