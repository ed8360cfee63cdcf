"""Views of a job (the ranks of one run) and of a series of runs: terminal, Markdown, HTML and Perfetto."""
