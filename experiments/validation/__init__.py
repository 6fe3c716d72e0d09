"""Sim-to-real validation of the engine profiles (``python -m experiments.validation``)."""
