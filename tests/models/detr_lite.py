"""A DETR-style set-prediction detector at toy scale (developer tool: needs torch; see
generate.py): conv backbone, 1x1 projection, fixed 2-D sine position encoding, an
nn.Transformer encoder-decoder over the feature map with learned object queries, and the class
(softmax) and box (sigmoid cx, cy, w, h) heads."""
from __future__ import annotations

import math

import torch
from torch import nn


def sine_positions(h: int, w: int, dim: int) -> torch.Tensor:
    """(h*w, dim) fixed position encoding: half the channels for y, half for x."""
    quarter = dim // 4
    freq = 1.0 / (10000 ** (torch.arange(quarter, dtype=torch.float32) / quarter))
    ys = torch.arange(h, dtype=torch.float32)[:, None, None] * freq
    xs = torch.arange(w, dtype=torch.float32)[None, :, None] * freq
    pe = torch.cat([ys.sin().expand(h, w, quarter), ys.cos().expand(h, w, quarter),
                    xs.sin().expand(h, w, quarter), xs.cos().expand(h, w, quarter)], -1)
    return pe.reshape(h * w, dim) * (1 / math.sqrt(dim))


class DetrLite(nn.Module):
    def __init__(self, dim=32, queries=8, classes=5, feat_hw=(4, 4)):
        super().__init__()
        chans = [3, 8, 16, 32, 48]
        layers = []
        for cin, cout in zip(chans, chans[1:]):
            layers += [nn.Conv2d(cin, cout, 3, 2, 1), nn.BatchNorm2d(cout), nn.ReLU()]
        self.backbone = nn.Sequential(*layers)         # 64x64 -> 4x4
        self.proj = nn.Conv2d(chans[-1], dim, 1)
        self.register_buffer("pos", sine_positions(*feat_hw, dim)[None])
        self.query = nn.Parameter(torch.randn(1, queries, dim))
        self.transformer = nn.Transformer(dim, nhead=2, num_encoder_layers=1,
                                          num_decoder_layers=1, dim_feedforward=64,
                                          dropout=0.0, batch_first=True)
        self.cls = nn.Linear(dim, classes + 1)         # + "no object"
        self.box = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 4))

    def forward(self, image):
        f = self.proj(self.backbone(image))            # (1, dim, h, w)
        seq = f.flatten(2).transpose(1, 2) + self.pos  # (1, h*w, dim)
        hs = self.transformer(seq, self.query)
        return self.cls(hs).softmax(-1), self.box(hs).sigmoid()
