"""Measurements of brushrl's GPU stages that need no cluster: ``gpu_smoke_single`` (one process, one GPU)."""
