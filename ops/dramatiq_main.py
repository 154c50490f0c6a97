"""`python -m ops.dramatiq_main ARGS` is `dramatiq ARGS --skip-logging` with our log format
set up first, so the parent process's own records (booting up, a worker that died) are
JSON lines too when POSTROOM_LOG_FORMAT=json; the worker processes it forks inherit it."""

import sys

from dramatiq.cli import main

from ops.log_format import configure
from pipelines.settings import Settings

if __name__ == "__main__":
    configure(Settings.from_env().log_format)
    sys.exit(main())
