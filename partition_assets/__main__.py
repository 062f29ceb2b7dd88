import sys

from partition_assets.cli import main

sys.exit(main())
