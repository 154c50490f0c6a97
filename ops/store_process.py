"""Runs nx-27017 with its per-command INFO logging switched off (it logs every command,
twice, which costs throughput and fills the disk); warnings and errors still go to the log.
Its files (one SQLite database per database, with journals) are created owner-only."""

import logging
import os
import sys

from nx_27017.nx_27017 import main

if __name__ == "__main__":
    os.umask(0o077)
    logging.disable(logging.INFO)
    sys.argv[0] = "nx-27017"
    main()
