"""Subcommands of the ``tau2-gym`` CLI (one module each)."""
