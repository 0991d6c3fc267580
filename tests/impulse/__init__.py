"""Tests of the impulse source."""
