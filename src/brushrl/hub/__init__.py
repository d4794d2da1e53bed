"""The hub models brushrl's GPU configs name, offline: their shipped ``config.json`` files
(``configs/``, sources in ``configs/README.md``) and tiny random twins of them (:mod:`brushrl.hub.twins`)."""
