"""Listener security: TLS, SASL mechanisms and the authorizer (Kafka's names and semantics)."""
