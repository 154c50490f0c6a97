"""The HTTP front: validates, writes intent to the store, enqueues, answers."""
