"""Measuring what the pipeline produced: numerics against a reference, and speed.

- `reference.py`: onnxruntime's outputs for a model, the reference for float numerics;
- `compare.py`: `rvvkit compare`, one model on several executors against the reference, with
  `scoring.py` (how far an output is from the reference) and `plot.py` (the chart);
- `bench.py`: `rvvkit bench`, latency and exact instruction counts per executor;
- `cycle_model.py`: a board's modelled time from instruction counts;
- `report.py`: the plain-text tables the commands print."""
