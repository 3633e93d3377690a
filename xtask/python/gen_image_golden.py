"""Golden tensors for mppq's image preprocessing (crates/mppq-api/tests/images.rs).

Writes small test images into testdata/images (once: existing images are kept, so the goldens
always describe the committed files) and, for every case of testdata/images_golden/cases.json, the
tensor Pillow + NumPy give for it into testdata/images_golden/golden.npz, following the conventions
mppq implements: torchvision's Resize(S) / CenterCrop, Ultralytics' letterbox, Pillow's
resize filters and convert("L"), float32 (x * scale - mean) / std.

Run: target/mppq-venv/bin/python xtask/python/gen_image_golden.py
"""
import json
import os

import numpy as np
from PIL import Image

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "images")
GOLDEN = os.path.join(ROOT, "..", "images_golden")
FILTERS = {
    "nearest": Image.NEAREST,
    "box": Image.BOX,
    "bilinear": Image.BILINEAR,
    "hamming": Image.HAMMING,
    "bicubic": Image.BICUBIC,
    "lanczos": Image.LANCZOS,
}


def make_images():
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:29, 0:37]
    base = np.stack([x * 7, y * 9, (x + y) * 4], axis=-1).astype(np.float64)
    noisy = np.clip(base + rng.normal(0, 25, base.shape), 0, 255).astype(np.uint8)
    files = {
        "a.png": lambda p: Image.fromarray(noisy, "RGB").save(p),
        "sub/b.png": lambda p: Image.fromarray(
            np.concatenate([noisy[:, ::-1], np.full((29, 37, 1), 200, np.uint8)], axis=-1), "RGBA"
        ).save(p),
        "sub/c.png": lambda p: Image.fromarray(noisy[:, :30]).convert("P", palette=Image.ADAPTIVE).save(p),
        "d.jpg": lambda p: Image.fromarray(np.clip(base * 0.8 + 30, 0, 255).astype(np.uint8)).save(p, quality=90),
    }
    for name, save in files.items():
        path = os.path.join(ROOT, name)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            save(path)


def shorter_side(w, h, s):
    return (s, int(s * h / w)) if w <= h else (int(s * w / h), s)


def size(text):
    if "x" in text:
        w, h = text.split("x")
        return int(w), int(h)
    return int(text), int(text)


def preprocess(path, spec):
    img = Image.open(path)
    img = img.convert("L" if spec.get("channels") == "gray" else "RGB")
    f = FILTERS[spec.get("interpolation", "bilinear")]
    if "letterbox" in spec:
        bw, bh = size(spec["letterbox"])
        r = min(bw / img.width, bh / img.height)
        nw, nh = int(round(img.width * r)), int(round(img.height * r))
        if (nw, nh) != img.size:
            img = img.resize((nw, nh), f)
        canvas = Image.new(img.mode, (bw, bh), (spec.get("pad_value", 114),) * len(img.getbands()))
        canvas.paste(img, ((bw - nw) // 2, (bh - nh) // 2))
        img = canvas
    if "resize" in spec:
        r = spec["resize"]
        target = size(r) if "x" in r else shorter_side(img.width, img.height, int(r))
        img = img.resize(target, f)
    if "crop" in spec:
        cw, ch = size(spec["crop"])
        left = int(round((img.width - cw) / 2.0))
        top = int(round((img.height - ch) / 2.0))
        img = img.crop((left, top, left + cw, top + ch))
    a = np.asarray(img)
    if a.ndim == 2:
        a = a[:, :, None]
    if spec.get("channels") == "bgr":
        a = a[:, :, ::-1]
    if spec.get("dtype") != "uint8":
        scale = np.float32(spec.get("scale", 1.0 / 255.0))
        mean = np.asarray(spec.get("mean", [0.0]), np.float32)
        std = np.asarray(spec.get("std", [1.0]), np.float32)
        a = (a.astype(np.float32) * scale - mean) / std
    if spec.get("layout", "nchw") == "nchw":
        a = a.transpose(2, 0, 1)
    return np.ascontiguousarray(a)


def main():
    make_images()
    with open(os.path.join(GOLDEN, "cases.json")) as f:
        cases = json.load(f)
    out = {}
    for case in cases:
        out[case["name"]] = preprocess(os.path.join(ROOT, case["image"]), case["spec"])
    np.savez_compressed(os.path.join(GOLDEN, "golden.npz"), **out)
    print(f"{len(out)} golden tensors written")


if __name__ == "__main__":
    main()
