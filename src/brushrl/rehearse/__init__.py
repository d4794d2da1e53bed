"""``brushrl rehearse``: a GPU config run on a CPU machine with tiny stand-ins (docs/rehearse.md)."""
