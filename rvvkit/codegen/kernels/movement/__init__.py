"""Data-movement kernels on any element type: `layout.py` (Transpose, Concat), `strided.py`
(strided views: Slice, Expand, Tile, DepthToSpace; Split, Pad, Trilu, OneHot), `index.py` (Gather*,
Scatter*), `resize.py` (Resize/Upsample by build-time tables) and `grid.py` (GridSample)."""
