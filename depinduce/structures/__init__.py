"""Trees, spans, and the decoders that turn model scores into them."""
