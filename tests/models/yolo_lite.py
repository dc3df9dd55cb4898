"""A YOLO-style single-stage detector at toy scale (developer tool: needs torch; see generate.py).

Backbone of Conv-BN-SiLU with a C2f-like split/concat block and an SPPF, an FPN neck
(nearest Upsample + Concat), and a two-scale anchor-based detect head whose output is the
decoded boxes, YOLOv5-style: sigmoid, xy = (2 s - 0.5 + grid) * stride, wh = (2 s)^2 * anchor,
all anchors of all scales concatenated to (1, boxes, 5 + classes)."""
from __future__ import annotations

import torch
from torch import nn


def cbs(cin, cout, k=3, s=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout),
                         nn.SiLU())


class Bottleneck(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a, self.b = cbs(c, c, 3), cbs(c, c, 3)

    def forward(self, x):
        return x + self.b(self.a(x))


class C2f(nn.Module):
    """Split the channels in two, run bottlenecks on one half, concat every intermediate."""

    def __init__(self, cin, cout, n=1):
        super().__init__()
        self.h = cout // 2
        self.inp = cbs(cin, 2 * self.h, 1)
        self.blocks = nn.ModuleList(Bottleneck(self.h) for _ in range(n))
        self.out = cbs((2 + n) * self.h, cout, 1)

    def forward(self, x):
        ys = list(self.inp(x).chunk(2, 1))
        for blk in self.blocks:
            ys.append(blk(ys[-1]))
        return self.out(torch.cat(ys, 1))


class SPPF(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.inp, self.out = cbs(c, c // 2, 1), cbs(c * 2, c, 1)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.inp(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.out(torch.cat([x, y1, y2, self.pool(y2)], 1))


class Detect(nn.Module):
    def __init__(self, chs, strides, anchors, nc):
        super().__init__()
        self.nc, self.no, self.na = nc, nc + 5, len(anchors[0])
        self.strides = strides
        self.convs = nn.ModuleList(nn.Conv2d(c, self.na * self.no, 1) for c in chs)
        for i, a in enumerate(anchors):
            self.register_buffer(f"anchor{i}", torch.tensor(a, dtype=torch.float32)
                                 .view(1, self.na, 1, 1, 2))

    def forward(self, feats):
        out = []
        for i, (conv, x) in enumerate(zip(self.convs, feats)):
            _, _, h, w = x.shape
            y = conv(x).view(1, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
            gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32),
                                    torch.arange(w, dtype=torch.float32), indexing="ij")
            grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2)
            xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.strides[i]
            wh = (y[..., 2:4] * 2) ** 2 * getattr(self, f"anchor{i}")
            out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(1, -1, self.no))
        return torch.cat(out, 1)


class YoloLite(nn.Module):
    def __init__(self, nc=3):
        super().__init__()
        self.s1 = nn.Sequential(cbs(3, 8, 3, 2), cbs(8, 16, 3, 2), C2f(16, 16))        # /4
        self.s2 = nn.Sequential(cbs(16, 32, 3, 2), C2f(32, 32))                         # /8
        self.s3 = nn.Sequential(cbs(32, 64, 3, 2), C2f(64, 64), SPPF(64))               # /16
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.p3 = C2f(64 + 32, 32)
        self.down = cbs(32, 32, 3, 2)
        self.p4 = C2f(32 + 64, 64)
        self.detect = Detect([32, 64], [8, 16], [[(10, 13), (16, 30)], [(30, 61), (62, 45)]], nc)

    def forward(self, x):
        c3 = self.s2(self.s1(x))
        c4 = self.s3(c3)
        p3 = self.p3(torch.cat([self.up(c4), c3], 1))
        p4 = self.p4(torch.cat([self.down(p3), c4], 1))
        return self.detect([p3, p4])
