"""Dramatiq actors, one module per queue. Call `actors.broker.setup(settings)` before
importing any actor module: an actor binds to the broker that is current when declared."""
