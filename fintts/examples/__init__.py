"""Example tasks: small, complete plug-ins of the session trainer (used by its tests and benchmarks)."""
