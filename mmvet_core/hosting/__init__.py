"""A public host's protections: upload and parsing limits, stored-run bounds, request limits, remote files, gone
clients, the agents' judges. May import everything above but service and cli."""
