"""Capacity planning: the resource plan of a config (``resources``) and run-time estimates."""
