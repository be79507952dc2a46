import sys

from fintts.cli import main

sys.exit(main())
