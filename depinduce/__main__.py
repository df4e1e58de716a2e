"""``python -m depinduce`` runs the CLI."""

from depinduce.cli.main import main

main()
