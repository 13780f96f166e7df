"""Tests of what a user installs: the wheel, its dependencies, the types."""
