import sys

from traceinsight.cli.app import main

sys.exit(main())
