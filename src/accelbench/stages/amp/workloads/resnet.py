"""The ``resnet`` workload: a bottleneck ResNet in plain torch (torchvision's ResNet-50 layout, without
torchvision) and its generated image set.

The network (``build_resnet``): the ImageNet stem (7x7 conv stride 2, BatchNorm, ReLU, 3x3 max-pool stride 2),
four stages of bottleneck blocks (1x1 reduce, 3x3, 1x1 expand x4; the stride on the 3x3, as torchvision's
"ResNet v1.5"), ``layers`` blocks per stage with widths ``width`` x (1, 2, 4, 8), global average pooling and a
linear classifier. ``resnet50`` is layers [3, 4, 6, 3], width 64, 224² images, 1000 classes; ``small`` is the CPU
variant (one block per stage, width 8, 32² images, 8 classes). With ``channels_last`` the model and its input use
``torch.channels_last``.

The images (``make_images``) are learnable and generated: every class has a fixed random smooth template
(8x8 Gaussian noise upsampled bilinearly), an image is its class's template plus pixel noise, stored as uint8
(the model's first op maps 0..255 to -1..1), so a 224² set of a few thousand images stays small on the host.
"""

from __future__ import annotations

RESNET_PRESETS = {
    "small": {"layers": [1, 1, 1, 1], "width": 8, "image_size": 32, "n_classes": 8},
    "resnet50": {"layers": [3, 4, 6, 3], "width": 64, "image_size": 224, "n_classes": 1000},
}
SIZE_KEYS = ("layers", "width", "image_size", "n_classes")
EXPANSION = 4


def resolve(resnet_cfg: dict) -> dict:
    preset = resnet_cfg.get("preset", "small")
    if preset not in RESNET_PRESETS:
        raise ValueError(f"amp.resnet.preset: unknown {preset!r}; allowed: {', '.join(RESNET_PRESETS)}")
    sizes = dict(RESNET_PRESETS[preset])
    sizes.update({k: resnet_cfg[k] for k in SIZE_KEYS if resnet_cfg.get(k) is not None})
    sizes["channels_last"] = bool(resnet_cfg.get("channels_last", False))
    sizes["preset"] = preset
    return sizes


def build_resnet(sizes: dict, torch):
    """``model(images uint8 (B, 3, S, S)) -> logits (B, n_classes)``."""
    nn = torch.nn
    width, classes = sizes["width"], sizes["n_classes"]
    channels_last = sizes["channels_last"]

    class Bottleneck(nn.Module):
        def __init__(self, cin, mid, stride):
            super().__init__()
            cout = mid * EXPANSION
            self.conv1, self.bn1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
            self.conv2, self.bn2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
            self.conv3, self.bn3 = nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + (x if self.down is None else self.down(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, width, 7, 2, 3, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1),
            )
            blocks, cin = [], width
            for i, n in enumerate(sizes["layers"]):
                mid = width * 2**i
                for j in range(n):
                    blocks.append(Bottleneck(cin, mid, 2 if (j == 0 and i > 0) else 1))
                    cin = mid * EXPANSION
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, classes)

        def forward(self, images):
            x = images.float().div(127.5).sub(1.0)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            x = self.blocks(self.stem(x))
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))

    model = ResNet()
    return model.to(memory_format=torch.channels_last) if channels_last else model


def _out(size: int, k: int, s: int, p: int) -> int:
    return (size + 2 * p - k) // s + 1


def forward_macs(sizes: dict) -> int:
    """Multiply-accumulates of one forward pass of one image, from the layer shapes (convolutions and the
    classifier; BatchNorm, ReLU, pooling and the residual adds left out, as the usual "4.1 GFLOPs" of ResNet-50
    at 224², which counts multiply-accumulates)."""
    width, s = sizes["width"], sizes["image_size"]
    s = _out(s, 7, 2, 3)
    macs = 7 * 7 * 3 * width * s * s
    s = _out(s, 3, 2, 1)  # max-pool
    cin = width
    for i, n in enumerate(sizes["layers"]):
        mid = width * 2**i
        cout = mid * EXPANSION
        for j in range(n):
            stride = 2 if (j == 0 and i > 0) else 1
            so = _out(s, 3, stride, 1)
            macs += cin * mid * s * s + 9 * mid * mid * so * so + mid * cout * so * so
            if stride != 1 or cin != cout:
                macs += cin * cout * so * so
            s, cin = so, cout
    return macs + cin * sizes["n_classes"]


def analytic_flops_per_image(sizes: dict) -> float:
    """Training FLOPs per image: 3 x 2 x forward MACs (one forward, a backward of twice the forward: the
    gradients of the activations and of the weights; 2 FLOPs per multiply-accumulate)."""
    return 3 * 2 * forward_macs(sizes)


def make_images(sizes: dict, resnet_cfg: dict, gen, torch) -> tuple:
    """(x_train uint8 (n, 3, S, S), y_train, x_test, y_test): class templates plus noise, balanced classes."""
    F = torch.nn.functional
    S, C = sizes["image_size"], sizes["n_classes"]
    n = resnet_cfg["n_train"] + resnet_cfg["n_test"]
    templates = F.interpolate(torch.randn(C, 3, 8, 8, generator=gen), size=(S, S), mode="bilinear", align_corners=False)
    templates = templates / templates.flatten(1).std(1).view(C, 1, 1, 1)
    y = torch.randint(0, C, (n,), generator=gen)
    x = torch.empty(n, 3, S, S, dtype=torch.uint8)
    for i in range(0, n, 256):  # in chunks: a float copy of a 224² set would be large
        yi = y[i : i + 256]
        img = templates[yi] + resnet_cfg["noise"] * torch.randn(len(yi), 3, S, S, generator=gen)
        x[i : i + 256] = (img * 40 + 127.5).clamp(0, 255).to(torch.uint8)
    tr = resnet_cfg["n_train"]
    return x[:tr].contiguous(), y[:tr].contiguous(), x[tr:].contiguous(), y[tr:].contiguous()
