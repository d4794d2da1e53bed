"""Hugging Face hub models: their weights fetched once to shared storage (``brushrl.hub.weights``)."""
