"""Benchmarks that cross stages: ``render_benchmark`` (``brushrl bench render``: the render farm, with
the reward proxy's determinism). The GPU smoke is ``brushrl.rehearse.gpu_smoke``."""
