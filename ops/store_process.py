"""Runs nx-27017 with its per-command INFO logging switched off (it logs every command,
twice, which costs throughput and fills the disk); warnings and errors still go to the log."""

import logging
import sys

from nx_27017.nx_27017 import main

if __name__ == "__main__":
    logging.disable(logging.INFO)
    sys.argv[0] = "nx-27017"
    main()
