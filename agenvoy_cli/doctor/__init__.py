"""doctor: checks (and repairs) the invariants of a home."""
