"""One module per API: each declares ``REQUEST`` and ``RESPONSE`` once, for all versions."""
