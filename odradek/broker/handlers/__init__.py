"""Request handlers, one module per area; each has ``register(table, app)``."""
