"""`python3 -m rvvkit.zoo NAME OUT.onnx`: a light model with random weights (zoo/light.py)."""
from .light import main

raise SystemExit(main())
