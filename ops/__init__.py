"""The `postroom` command: runs the processes and administers workspaces, keys and queues."""
