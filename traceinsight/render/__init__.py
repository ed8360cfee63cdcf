"""Renderers: turn results into terminal output, JSON and other formats. Results know nothing of them."""
