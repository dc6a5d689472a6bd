"""The HTTP surfaces on the broker's event loop: thin routes over the domains and the facades below.

``control.py`` serves test control (``broker.control.BrokerControl``'s operations, by name).
A route parses, calls the facade or a domain, and renders; nothing on an HTTP path blocks the
loop or reads a whole partition.  This layer imports the broker; the broker's wiring
(``broker/app.py``) starts the surfaces its configuration asks for.
"""
