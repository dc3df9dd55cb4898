"""The ONNX backend conformance suite run against rvvkit.

- `backend.py`: rvvkit as an `onnx.backend.base.Backend`;
- `suite.py`: the node suite's cases, the reasoned exclusions by category, and the runner;
- `forked.py`: each case in a forked child, so that generated code that crashes or hangs fails
  its own case only."""
