"""Analyses over several traces: the ranks of one job, or a series of runs."""
