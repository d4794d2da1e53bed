"""The hub models brushrl's GPU configs name, offline: their shipped ``config.json`` files
(``configs/``, sources in ``configs/README.md``), tiny random twins of them (:mod:`brushrl.hub.twins`),
and their weights fetched once to shared storage (:mod:`brushrl.hub.weights`)."""
