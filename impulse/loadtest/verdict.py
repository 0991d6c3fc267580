"""Moved to `impulse.loadtest.reports.verdict`: this old path gives that module, with a `DeprecationWarning`, for one release."""

from impulse.loadtest.moved import alias

alias(__name__)
