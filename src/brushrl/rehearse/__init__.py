"""``brushrl rehearse``: a GPU config run on a CPU machine with tiny stand-ins (docs/rehearse.md); and
the GPU smoke, ``python -m brushrl.rehearse.gpu_smoke`` (``make gpu-smoke``, docs/perf/gpu_smoke.md):
the same config's real learner on a GPU (``gpu_smoke``), or its pipeline with the rehearsal's stand-ins
put back on one GPU (``--pipeline``, ``gpu_pipeline``)."""
