"""Entry point of a decode helper process: ``python -m traceinsight.trace.decode_helper``.

Kept apart from :mod:`.parallel` so that running it does not import that module twice.
"""

import sys

from traceinsight.trace.parallel import helper_main

if __name__ == "__main__":
    sys.exit(helper_main(sys.stdin.buffer))
