"""The verdict: the ranked findings result and the plain-words headline built on it."""
