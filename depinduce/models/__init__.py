"""Model backends, discovered through the ``depinduce.models`` entry-point group."""
