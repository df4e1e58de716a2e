"""depinduce: induce syntax from raw text, parse into standard formats, and score parses."""

__version__ = "0.1.0"
