"""Helpers that more than one test module uses, by job (issue #29).

A test module imports its helpers from here (or from tests/conftest.py, which holds the
shared fixtures), never from another test module. tests/conftest.py registers this package
for pytest's assertion rewriting, so a helper's failed assert explains itself as a test's does.
"""
