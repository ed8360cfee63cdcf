"""Detector estimates turned into savings: shares and pool caps, the replayed what-if
composition, the step priced on the program's clock, and the what-if transformations the
detectors attach to their estimates."""
