#!/usr/bin/env python3
"""Deterministic generator for mppq's ONNX test models and calibration data.

    target/mppq-venv/bin/python xtask/python/gen_testdata.py [--out testdata]
    target/mppq-venv/bin/python xtask/python/gen_testdata.py --resnet18 OUT.onnx

Default invocation writes the committed models into testdata/:

  tiny_cnn.onnx          Conv/BN/Relu/MaxPool/residual Add/GAP/Gemm classifier
  tiny_transformer.onnx  2 pre-LN encoder blocks (LayerNormalization, 4-head
                         attention with Reshape/Transpose, Erf-GELU MLP)
  detect_branch.onnx     detection-style graph with an int64 shape branch
                         (Shape -> Gather -> Unsqueeze/Mul -> Concat -> Reshape)

and for each model <name>_calib/batch_000.npz .. batch_007.npz (calibration
inputs, keys = graph input names; the directory holds nothing else, so it can be
passed to `mppq quantize --calib`) plus <name>_expected/batch_000.npz
(onnxruntime outputs on batch_000, keys = graph output names).

`--resnet18 OUT.onnx` writes only a ResNet-18 topology model (~45 MB, not
committed) with random weights; `--resnet18-calib DIR` additionally writes
calibration batches for it.

Only the `onnx` helper API and numpy build the models; onnxruntime is used
only to verify them and to produce the expected outputs. Everything is
seeded, and the .onnx/.npz files are byte-identical between runs
(the npz writer uses a fixed zip timestamp). BatchNorm running statistics are
"calibrated": they are the real per-channel statistics of the pre-BN
activations on a fixed random batch (computed in float64 numpy and rounded to
4 significant digits, then perturbed), so the networks behave like trained
ones: activations stay O(1) through every layer, and folding BN into Conv
changes the weights substantially.

Models use opset 17 and IR version 8.
"""
import argparse
import io
import math
import os
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
PRODUCER = "mppq-testdata"
PRODUCER_VERSION = "1"
N_CALIB_BATCHES = 8

# ImageNet normalisation used for all image-like inputs.
IMG_MEAN = np.array([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)
IMG_STD = np.array([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)


# ---------------------------------------------------------------------------
# helpers


def round_sig(x: np.ndarray, sig: int = 4) -> np.ndarray:
    """Round to `sig` significant digits (makes BLAS-dependent stats stable)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    nz = x != 0
    mag = np.floor(np.log10(np.abs(x[nz])))
    scale = 10.0 ** (sig - 1 - mag)
    out[nz] = np.round(x[nz] * scale) / scale
    return out


def save_npz(path: str, arrays: dict) -> None:
    """Like np.savez, but byte-deterministic (fixed zip timestamps, sorted keys)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key in sorted(arrays):
            arr = np.array(arrays[key], order="C", copy=True)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            data = io.BytesIO()
            np.lib.format.write_array(data, arr, allow_pickle=False)
            zf.writestr(info, data.getvalue())
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def make_images(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """Smooth-ish random RGB images in [0,1], ImageNet-normalised, float32 NCHW."""
    low = max(2, size // 8)
    rep = size // low
    base = rng.uniform(0.0, 1.0, size=(n, 3, low, low))
    img = np.repeat(np.repeat(base, rep, axis=2), rep, axis=3)
    # cheap 3x3 box blur to soften block edges
    p = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="edge")
    img = sum(p[:, :, i : i + size, j : j + size] for i in range(3) for j in range(3)) / 9.0
    img = img + rng.normal(0.0, 0.08, size=img.shape)
    img = np.clip(img, 0.0, 1.0)
    return ((img - IMG_MEAN) / IMG_STD).astype(np.float32)


# --- float64 numpy reference ops (used to calibrate BN statistics) ----------


def np_conv(x, w, b=None, stride=1, pad=0):
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2], w.shape[3]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]  # N C Ho Wo kh kw
    y = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))  # N Ho Wo O
    y = y.transpose(0, 3, 1, 2)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return np.ascontiguousarray(y)


def np_maxpool(x, k, stride, pad=0):
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
    return win.max(axis=(4, 5))


# ---------------------------------------------------------------------------
# graph builder with a float64 "shadow" forward pass


class Builder:
    def __init__(self, name: str, seed: int, shadow_input=None):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.names = set()
        self.counter = {}
        self.shadow = {}
        if shadow_input is not None:
            self.shadow.update(shadow_input)

    # names ---------------------------------------------------------------
    def fresh(self, base: str) -> str:
        k = self.counter.get(base, 0)
        self.counter[base] = k + 1
        name = f"{base}_{k}" if k or base in self.names else base
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def init(self, base: str, arr: np.ndarray) -> str:
        name = self.fresh(base)
        # (np.ascontiguousarray would turn 0-d scalars into shape [1])
        self.inits.append(numpy_helper.from_array(np.array(arr, order="C", copy=True), name))
        return name

    def node(self, op: str, inputs, n_out=1, out_names=None, base=None, **attrs):
        nname = self.fresh((base or op.lower()))
        if out_names is None:
            out_names = [nname if n_out == 1 else f"{nname}_out{i}" for i in range(n_out)]
            for o in out_names:
                self.names.add(o)
        else:
            for o in out_names:
                self.names.add(o)
        self.nodes.append(helper.make_node(op, list(inputs), list(out_names), name=nname, **attrs))
        return out_names[0] if len(out_names) == 1 else out_names

    # layers ----------------------------------------------------------------
    def conv(self, x, cin, cout, k, stride=1, pad=0, bias=False, base="conv", out=None):
        fan_out = cout * k * k
        w = self.rng.normal(0.0, math.sqrt(2.0 / fan_out), size=(cout, cin, k, k)).astype(np.float32)
        ins = [x, self.init(base + ".weight", w)]
        b = None
        if bias:
            bound = 1.0 / math.sqrt(cin * k * k)
            b = self.rng.uniform(-bound, bound, size=(cout,)).astype(np.float32)
            ins.append(self.init(base + ".bias", b))
        y = self.node(
            "Conv", ins, base=base, out_names=[out] if out else None,
            kernel_shape=[k, k], strides=[stride, stride], pads=[pad, pad, pad, pad],
        )
        if x in self.shadow:
            self.shadow[y] = np_conv(
                self.shadow[x], w.astype(np.float64), None if b is None else b.astype(np.float64), stride, pad
            )
        return y

    def dwconv(self, x, c, k, stride=1, pad=0, base="dwconv"):
        """Depthwise Conv (group = channels), no bias."""
        w = self.rng.normal(0.0, math.sqrt(2.0 / (k * k)), size=(c, 1, k, k)).astype(np.float32)
        y = self.node(
            "Conv", [x, self.init(base + ".weight", w)], base=base,
            kernel_shape=[k, k], strides=[stride, stride], pads=[pad, pad, pad, pad], group=c,
        )
        if x in self.shadow:
            xs, wd = self.shadow[x], w.astype(np.float64)
            self.shadow[y] = np.concatenate(
                [np_conv(xs[:, i:i + 1], wd[i:i + 1], None, stride, pad) for i in range(c)], axis=1
            )
        return y

    def bn(self, x, c, base="bn", out=None, gamma=None):
        gamma = self.rng.uniform(0.5, 1.5, size=c) if gamma is None else gamma
        beta = self.rng.normal(0.0, 0.25, size=c)
        if x in self.shadow:
            s = self.shadow[x]
            mean = round_sig(s.mean(axis=(0, 2, 3)))
            var = round_sig(s.var(axis=(0, 2, 3)) + 1e-3)
        else:
            mean = self.rng.normal(0.0, 0.5, size=c)
            var = self.rng.uniform(0.5, 2.0, size=c)
        # running statistics are estimates: perturb them a little, like EMA stats
        mean = mean + self.rng.normal(0.0, 0.05, size=c) * np.sqrt(var)
        var = var * self.rng.uniform(0.85, 1.15, size=c)
        eps = 1e-5
        ps = [g.astype(np.float32) for g in (gamma, beta, mean, var)]
        ins = [x] + [self.init(f"{base}.{n}", p) for n, p in zip(("weight", "bias", "running_mean", "running_var"), ps)]
        y = self.node("BatchNormalization", ins, base=base, out_names=[out] if out else None, epsilon=eps, momentum=0.9)
        if x in self.shadow:
            g, bt, m, v = (p.astype(np.float64).reshape(1, -1, 1, 1) for p in ps)
            self.shadow[y] = (self.shadow[x] - m) / np.sqrt(v + eps) * g + bt
        return y

    def relu(self, x, base="relu", out=None):
        y = self.node("Relu", [x], base=base, out_names=[out] if out else None)
        if x in self.shadow:
            self.shadow[y] = np.maximum(self.shadow[x], 0.0)
        return y

    def add(self, a, b, base="add", out=None):
        y = self.node("Add", [a, b], base=base, out_names=[out] if out else None)
        if a in self.shadow and b in self.shadow:
            self.shadow[y] = self.shadow[a] + self.shadow[b]
        return y

    def maxpool(self, x, k, stride, pad=0, base="maxpool"):
        y = self.node("MaxPool", [x], base=base, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
        if x in self.shadow:
            self.shadow[y] = np_maxpool(self.shadow[x], k, stride, pad)
        return y

    def gap_flatten(self, x):
        g = self.node("GlobalAveragePool", [x], base="gap")
        f = self.node("Flatten", [g], base="flatten", axis=1)
        if x in self.shadow:
            self.shadow[f] = self.shadow[x].mean(axis=(2, 3))
        return f

    def gemm(self, x, cin, cout, base="fc", out=None):
        bound = 1.0 / math.sqrt(cin)
        w = self.rng.uniform(-bound, bound, size=(cout, cin)).astype(np.float32)
        b = self.rng.uniform(-bound, bound, size=(cout,)).astype(np.float32)
        y = self.node(
            "Gemm", [x, self.init(base + ".weight", w), self.init(base + ".bias", b)],
            base=base, out_names=[out] if out else None, transB=1,
        )
        if x in self.shadow:
            self.shadow[y] = self.shadow[x] @ w.T.astype(np.float64) + b
        return y

    # model ---------------------------------------------------------------
    def model(self, inputs, outputs, doc="", opset=OPSET) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, initializer=self.inits)
        m = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", opset)],
            producer_name=PRODUCER,
            producer_version=PRODUCER_VERSION,
        )
        m.ir_version = IR_VERSION
        m.model_version = 1
        if doc:
            m.doc_string = doc
        return m


# ---------------------------------------------------------------------------
# a. tiny_cnn


def build_tiny_cnn() -> onnx.ModelProto:
    stats_in = make_images(np.random.default_rng(1001), 16, 32).astype(np.float64)
    b = Builder("tiny_cnn", seed=11, shadow_input={"input": stats_in})
    x = b.conv("input", 3, 16, 3, 1, 1, bias=True, base="conv1")
    x = b.relu(b.bn(x, 16, base="bn1"), base="relu1")
    x = b.conv(x, 16, 32, 3, 2, 1, base="conv2")
    x = b.relu(b.bn(x, 32, base="bn2"), base="relu2")
    skip = b.maxpool(x, 2, 2, base="pool")
    x = b.conv(skip, 32, 32, 3, 1, 1, base="conv3")
    x = b.bn(x, 32, base="bn3")
    x = b.add(x, skip, base="residual")
    x = b.relu(x, base="relu3")
    x = b.gap_flatten(x)
    b.gemm(x, 32, 10, base="fc", out="logits")
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 32, 32])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])
    return b.model([inp], [out], "mppq test model: tiny CNN classifier (Conv+BN+Relu, residual Add, GAP, Gemm)")


def calib_tiny_cnn(i: int) -> dict:
    return {"input": make_images(np.random.default_rng(2000 + i), 1, 32)}


# ---------------------------------------------------------------------------
# b. tiny_transformer

D_MODEL, N_HEADS, SEQ, D_FF = 64, 4, 16, 128
D_HEAD = D_MODEL // N_HEADS


def build_tiny_transformer() -> onnx.ModelProto:
    b = Builder("tiny_transformer", seed=22)
    rng = b.rng

    def lin(x, cin, cout, base):
        bound = 1.0 / math.sqrt(cin)
        w = rng.uniform(-bound, bound, size=(cin, cout)).astype(np.float32)
        bias = rng.uniform(-bound, bound, size=(cout,)).astype(np.float32)
        y = b.node("MatMul", [x, b.init(base + ".weight", w)], base=base + ".matmul")
        return b.node("Add", [y, b.init(base + ".bias", bias)], base=base + ".add")

    def ln(x, base, outlier=False):
        gamma = rng.uniform(0.8, 1.2, size=D_MODEL)
        if outlier:
            # a few large-gain channels, like the outlier features of real LLMs
            idx = rng.choice(D_MODEL, size=2, replace=False)
            gamma[idx] *= 6.0
        beta = rng.normal(0.0, 0.05, size=D_MODEL)
        return b.node(
            "LayerNormalization",
            [x, b.init(base + ".weight", gamma.astype(np.float32)), b.init(base + ".bias", beta.astype(np.float32))],
            base=base, axis=-1, epsilon=1e-5,
        )

    split_shape = b.init("shape.split_heads", np.array([0, 0, N_HEADS, D_HEAD], dtype=np.int64))
    merge_shape = b.init("shape.merge_heads", np.array([-1, SEQ, D_MODEL], dtype=np.int64))
    scale = b.init("attn.scale", np.array(1.0 / math.sqrt(D_HEAD), dtype=np.float32))
    half = b.init("gelu.half", np.array(0.5, dtype=np.float32))
    one = b.init("gelu.one", np.array(1.0, dtype=np.float32))
    sqrt2 = b.init("gelu.sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))

    x = "tokens"
    for blk in range(2):
        p = f"blocks.{blk}"
        h = ln(x, p + ".ln1", outlier=(blk == 1))
        q = lin(h, D_MODEL, D_MODEL, p + ".attn.q")
        k = lin(h, D_MODEL, D_MODEL, p + ".attn.k")
        v = lin(h, D_MODEL, D_MODEL, p + ".attn.v")
        q = b.node("Reshape", [q, split_shape], base=p + ".attn.q_split")
        k = b.node("Reshape", [k, split_shape], base=p + ".attn.k_split")
        v = b.node("Reshape", [v, split_shape], base=p + ".attn.v_split")
        q = b.node("Transpose", [q], base=p + ".attn.q_t", perm=[0, 2, 1, 3])  # B H S Dh
        k = b.node("Transpose", [k], base=p + ".attn.k_t", perm=[0, 2, 3, 1])  # B H Dh S
        v = b.node("Transpose", [v], base=p + ".attn.v_t", perm=[0, 2, 1, 3])  # B H S Dh
        s = b.node("MatMul", [q, k], base=p + ".attn.qk")
        s = b.node("Mul", [s, scale], base=p + ".attn.scale")
        a = b.node("Softmax", [s], base=p + ".attn.softmax", axis=-1)
        o = b.node("MatMul", [a, v], base=p + ".attn.av")
        o = b.node("Transpose", [o], base=p + ".attn.o_t", perm=[0, 2, 1, 3])  # B S H Dh
        o = b.node("Reshape", [o, merge_shape], base=p + ".attn.merge")
        o = lin(o, D_MODEL, D_MODEL, p + ".attn.out")
        x = b.node("Add", [x, o], base=p + ".residual1")
        h = ln(x, p + ".ln2")
        h = lin(h, D_MODEL, D_FF, p + ".mlp.fc1")
        # GELU(x) = x * 0.5 * (1 + erf(x / sqrt(2)))
        g = b.node("Div", [h, sqrt2], base=p + ".mlp.gelu.div")
        g = b.node("Erf", [g], base=p + ".mlp.gelu.erf")
        g = b.node("Add", [g, one], base=p + ".mlp.gelu.add")
        g = b.node("Mul", [h, g], base=p + ".mlp.gelu.mul")
        g = b.node("Mul", [g, half], base=p + ".mlp.gelu.mul_half")
        h = lin(g, D_FF, D_MODEL, p + ".mlp.fc2")
        if blk == 1:
            b.node("Add", [x, h], base=p + ".residual2", out_names=["hidden"])
        else:
            x = b.node("Add", [x, h], base=p + ".residual2")

    inp = helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["batch", SEQ, D_MODEL])
    out = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", SEQ, D_MODEL])
    return b.model([inp], [out], "mppq test model: 2-block pre-LN transformer encoder on embedded tokens")


# fixed "embedding statistics": per-channel scale/offset shared by all batches
_TOK_RNG = np.random.default_rng(3000)
_TOK_SCALE = _TOK_RNG.uniform(0.5, 1.5, size=D_MODEL)
_TOK_OFFSET = _TOK_RNG.normal(0.0, 0.2, size=D_MODEL)


def calib_tiny_transformer(i: int) -> dict:
    rng = np.random.default_rng(3100 + i)
    pos = np.sin(np.arange(SEQ)[:, None] / (10.0 ** (np.arange(D_MODEL)[None, :] / D_MODEL * 2)))
    t = rng.normal(0.0, 1.0, size=(1, SEQ, D_MODEL)) * _TOK_SCALE + _TOK_OFFSET + 0.5 * pos
    return {"tokens": t.astype(np.float32)}


# ---------------------------------------------------------------------------
# c. detect_branch


def build_detect_branch() -> onnx.ModelProto:
    b = Builder("detect_branch", seed=33)
    x = b.conv("image", 3, 16, 3, 2, 1, bias=True, base="backbone.conv1")
    x = b.relu(x, base="backbone.relu1")
    f = b.conv(x, 16, 8, 3, 2, 1, bias=True, base="backbone.conv2")  # F: [1,8,16,16]

    # int64 shape branch on F
    shp = b.node("Shape", [f], base="shape")
    i0 = b.init("idx.batch", np.array(0, dtype=np.int64))
    i2 = b.init("idx.h", np.array(2, dtype=np.int64))
    i3 = b.init("idx.w", np.array(3, dtype=np.int64))
    axes0 = b.init("axes0", np.array([0], dtype=np.int64))
    minus1 = b.init("const.minus1", np.array([-1], dtype=np.int64))
    n_cls = b.init("const.num_classes", np.array([3], dtype=np.int64))
    n = b.node("Gather", [shp, i0], base="gather_batch", axis=0)  # scalar
    n1 = b.node("Unsqueeze", [n, axes0], base="unsqueeze_batch")  # [1]
    h = b.node("Gather", [shp, i2], base="gather_h", axis=0)
    w = b.node("Gather", [shp, i3], base="gather_w", axis=0)
    hw = b.node("Mul", [h, w], base="mul_hw")  # scalar int64
    hw1 = b.node("Unsqueeze", [hw, axes0], base="unsqueeze_hw")
    flat_shape = b.node("Concat", [n1, minus1], base="concat_flat_shape", axis=0)  # [N, -1]
    score_shape = b.node("Concat", [n1, n_cls, hw1], base="concat_score_shape", axis=0)  # [N, 3, H*W]

    # head 1: flattened features
    b.node("Reshape", [f, flat_shape], base="reshape_features", out_names=["features"])
    # head 2: per-location class scores
    s = b.conv(f, 8, 3, 1, 1, 0, bias=True, base="head.cls")
    s = b.node("Sigmoid", [s], base="head.sigmoid")
    b.node("Reshape", [s, score_shape], base="reshape_scores", out_names=["scores"])

    inp = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 64, 64])
    outs = [
        helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 2048]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3, 256]),
    ]
    return b.model([inp], outs, "mppq test model: conv backbone with Shape->Gather->Concat->Reshape int64 branch")


def calib_detect_branch(i: int) -> dict:
    return {"image": make_images(np.random.default_rng(4000 + i), 1, 64)}


# ---------------------------------------------------------------------------
# e. tiny_mobilenet


def build_tiny_mobilenet() -> onnx.ModelProto:
    """MobileNetV2-style: inverted residual blocks (1x1 expand + BN + ReLU, 3x3 depthwise + BN +
    ReLU, 1x1 project + BN, residual Add where shapes match). The depthwise BNs have gammas
    log-uniform in [0.02, 2], so after BN folding the depthwise kernels' channel ranges span 100x,
    as in trained MobileNetV2 (Nagel et al. 2019, fig. 2): per-tensor weight quantization then
    loses the small channels, which is what cross-layer equalization repairs. ReLU where
    MobileNetV2 has ReLU6, as DFQ evaluates it: equalization is exact through ReLU, not ReLU6."""
    stats_in = make_images(np.random.default_rng(7001), 16, 32).astype(np.float64)
    b = Builder("tiny_mobilenet", seed=77, shadow_input={"input": stats_in})
    x = b.conv("input", 3, 16, 3, 2, 1, base="stem")
    x = b.relu(b.bn(x, 16, base="stem.bn"), base="stem.relu")
    cin = 16
    for i, (cout, stride) in enumerate(((24, 1), (24, 1), (32, 2))):
        p = f"block{i}"
        hidden = cin * 4
        y = b.conv(x, cin, hidden, 1, base=p + ".expand")
        y = b.relu(b.bn(y, hidden, base=p + ".expand.bn"), base=p + ".expand.relu")
        y = b.dwconv(y, hidden, 3, stride, 1, base=p + ".dw")
        gamma = np.exp(b.rng.uniform(np.log(0.02), np.log(2.0), size=hidden))
        y = b.relu(b.bn(y, hidden, base=p + ".dw.bn", gamma=gamma), base=p + ".dw.relu")
        y = b.conv(y, hidden, cout, 1, base=p + ".project")
        y = b.bn(y, cout, base=p + ".project.bn")
        x = b.add(y, x, base=p + ".add") if (stride == 1 and cin == cout) else y
        cin = cout
    x = b.conv(x, cin, 128, 1, base="head")
    x = b.relu(b.bn(x, 128, base="head.bn"), base="head.relu")
    x = b.gap_flatten(x)
    b.gemm(x, 128, 10, base="fc", out="logits")
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 32, 32])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])
    return b.model([inp], [out], "mppq test model: MobileNetV2-style CNN (inverted residuals, depthwise, ReLU)")


def calib_tiny_mobilenet(i: int) -> dict:
    return {"input": make_images(np.random.default_rng(8000 + i), 1, 32)}


# ---------------------------------------------------------------------------
# f. tiny_if


def build_tiny_if() -> onnx.ModelProto:
    """A stem Conv+Relu in the main graph, then an If on the bool input `wide` whose branches
    (a narrow and a wide Conv head) read the stem's output from the enclosing scope, as Silero
    VAD picks its 16 kHz or 8 kHz network."""
    b = Builder("tiny_if", seed=91)
    stem = b.relu(b.conv("input", 3, 8, 3, 1, 1, bias=True, base="stem"), base="stem.relu", out="stem_out")
    branches = {}
    for name, (cout, stride), seed in (("narrow", (8, 1), 92), ("wide", (16, 2), 93)):
        br = Builder(f"tiny_if_{name}", seed=seed)
        p = f"head.{name}"
        y = br.relu(br.conv(stem, 8, cout, 3, stride, 1, bias=True, base=p + ".conv"), base=p + ".relu")
        g = br.node("GlobalAveragePool", [y], base=p + ".gap")
        f = br.node("Flatten", [g], base=p + ".flatten", axis=1)
        br.gemm(f, cout, 4, base=p + ".fc", out=p + ".logits")
        out = helper.make_tensor_value_info(p + ".logits", TensorProto.FLOAT, ["batch", 4])
        branches[name] = helper.make_graph(br.nodes, p, [], [out], initializer=br.inits)
    b.node("If", ["wide"], out_names=["logits"], base="head", then_branch=branches["wide"],
           else_branch=branches["narrow"])
    inputs = [
        helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 16, 16]),
        helper.make_tensor_value_info("wide", TensorProto.BOOL, []),
    ]
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])
    return b.model(inputs, [out], "mppq test model: Conv stem + If choosing a narrow or a wide Conv head")


def calib_tiny_if(i: int) -> dict:
    return {"input": make_images(np.random.default_rng(9000 + i), 8, 16), "wide": np.array(i % 2 == 0)}


# ---------------------------------------------------------------------------
# h. tiny_loop


def build_tiny_loop() -> onnx.ModelProto:
    """A Gemm+Relu stem, then a Loop of 3 iterations whose body is a Gemm+Relu on the carried
    state (its weight inside the body) plus a Gemm with a weight of the enclosing graph, as
    recurrent decoders loop a cell over a state; then a Gemm head."""
    b = Builder("tiny_loop", seed=121)
    h0 = b.relu(b.gemm("input", 16, 16, base="stem"), base="stem.relu", out="state0")
    outer_w = b.init("loop.shared.weight", b.rng.uniform(-0.25, 0.25, size=(16, 16)).astype(np.float32))
    body = Builder("tiny_loop_body", seed=122)
    y = body.relu(body.gemm("h_in", 16, 16, base="cell"), base="cell.relu")
    z = body.node("MatMul", [y, outer_w], base="cell.shared")
    body.node("Add", [y, z], base="cell.residual", out_names=["h_out"])
    body.node("Identity", ["cond_in"], base="cond", out_names=["cond_out"])
    body_graph = helper.make_graph(
        body.nodes, "loop_body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, ["batch", 16])],
        initializer=body.inits,
    )
    trips = b.init("loop.trips", np.array(3, np.int64))
    cond = b.init("loop.cond", np.array(True))
    h = b.node("Loop", [trips, cond, h0], base="loop", out_names=["state"], body=body_graph)
    b.gemm(h, 16, 4, base="head", out="logits")
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 16])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])
    return b.model([inp], [out], "mppq test model: Gemm stem + Loop (3 iterations of a Gemm cell) + Gemm head")


def calib_tiny_loop(i: int) -> dict:
    return {"input": np.random.default_rng(12000 + i).normal(0.0, 1.0, size=(64, 16)).astype(np.float32)}


# ---------------------------------------------------------------------------
# g. tiny_opset11


def build_tiny_opset11() -> onnx.ModelProto:
    """Opset 11, with a Resize that has no form at opset 13 (linear, `tf_half_pixel_for_nn`,
    removed at 13): the model cannot be converted to 13, where per-channel Q/DQ begin, so it
    is quantized per tensor at its own opset."""
    b = Builder("tiny_opset11", seed=111)
    x = b.relu(b.conv("input", 3, 8, 3, 1, 1, bias=True, base="conv1"), base="relu1")
    roi = b.init("resize.roi", np.zeros(0, np.float32))
    scales = b.init("resize.scales", np.array([1, 1, 2, 2], np.float32))
    x = b.node("Resize", [x, roi, scales], base="resize", mode="linear",
               coordinate_transformation_mode="tf_half_pixel_for_nn")
    b.conv(x, 8, 4, 3, 1, 1, bias=True, base="conv2", out="features")
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 8, 8])
    out = helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 4, 16, 16])
    return b.model([inp], [out], "mppq test model: opset 11 Conv + Resize(tf_half_pixel_for_nn) + Conv", opset=11)


def calib_tiny_opset11(i: int) -> dict:
    return {"input": make_images(np.random.default_rng(11000 + i), 2, 8)}


# ---------------------------------------------------------------------------
# d. ResNet-18


def build_resnet18() -> onnx.ModelProto:
    stats_in = make_images(np.random.default_rng(5001), 2, 224).astype(np.float64)
    b = Builder("resnet18", seed=55, shadow_input={"input": stats_in})
    x = b.conv("input", 3, 64, 7, 2, 3, base="conv1")
    x = b.relu(b.bn(x, 64, base="bn1"), base="relu")
    x = b.maxpool(x, 3, 2, 1, base="maxpool")
    cin = 64
    for li, cout in enumerate((64, 128, 256, 512), start=1):
        for bi in range(2):
            p = f"layer{li}.{bi}"
            stride = 2 if (bi == 0 and li > 1) else 1
            y = b.conv(x, cin, cout, 3, stride, 1, base=p + ".conv1")
            y = b.relu(b.bn(y, cout, base=p + ".bn1"), base=p + ".relu1")
            y = b.conv(y, cout, cout, 3, 1, 1, base=p + ".conv2")
            y = b.bn(y, cout, base=p + ".bn2")
            if stride != 1 or cin != cout:
                sc = b.conv(x, cin, cout, 1, stride, 0, base=p + ".downsample.0")
                sc = b.bn(sc, cout, base=p + ".downsample.1")
            else:
                sc = x
            x = b.relu(b.add(y, sc, base=p + ".add"), base=p + ".relu2")
            cin = cout
    x = b.gap_flatten(x)
    b.gemm(x, 512, 1000, base="fc", out="logits")
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])
    return b.model([inp], [out], "mppq test model: ResNet-18 topology with random (BN-calibrated) weights")


def calib_resnet18(i: int) -> dict:
    return {"input": make_images(np.random.default_rng(6000 + i), 1, 224)}


# ---------------------------------------------------------------------------
# driver


def save_model(model: onnx.ModelProto, path: str) -> None:
    onnx.checker.check_model(model, full_check=True)
    data = model.SerializeToString(deterministic=True)
    with open(path, "wb") as f:
        f.write(data)


def verify(path: str, calib: dict, expected_path=None) -> None:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    outs = sess.run(names, calib)
    for n, o in zip(names, outs):
        finite = bool(np.all(np.isfinite(o)))
        print(f"    {n}: shape={list(o.shape)} dtype={o.dtype} finite={finite} "
              f"mean={float(np.mean(o)):.4g} std={float(np.std(o)):.4g} absmax={float(np.max(np.abs(o))):.4g}")
        if not finite:
            raise SystemExit(f"{path}: output {n} has non-finite values")
    if expected_path:
        save_npz(expected_path, dict(zip(names, outs)))


MODELS = {
    "tiny_cnn": (build_tiny_cnn, calib_tiny_cnn),
    "tiny_transformer": (build_tiny_transformer, calib_tiny_transformer),
    "detect_branch": (build_detect_branch, calib_detect_branch),
    "tiny_mobilenet": (build_tiny_mobilenet, calib_tiny_mobilenet),
    "tiny_if": (build_tiny_if, calib_tiny_if),
    "tiny_opset11": (build_tiny_opset11, calib_tiny_opset11),
    "tiny_loop": (build_tiny_loop, calib_tiny_loop),
}


def write_calib(calib_fn, calib_dir: str) -> None:
    os.makedirs(calib_dir, exist_ok=True)
    for i in range(N_CALIB_BATCHES):
        save_npz(os.path.join(calib_dir, f"batch_{i:03d}.npz"), calib_fn(i))


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.normpath(os.path.join(here, "..", "..", "testdata"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=default_out, help="output directory for the committed models (default: testdata/)")
    ap.add_argument("--resnet18", metavar="OUT.onnx", help="write only the ResNet-18 model to this path")
    ap.add_argument("--resnet18-calib", metavar="DIR", help="with --resnet18: also write calibration batches here")
    ap.add_argument("--no-verify", action="store_true", help="skip the onnxruntime check")
    ap.add_argument("--eval", metavar="DIR", help="write only held-out evaluation batches: DIR/<model>/batch_*.npz "
                    "(for every testdata model and ResNet-18), from the calibration generators with seeds the "
                    "calibration batches never use")
    ap.add_argument("--eval-batches", type=int, default=16, help="with --eval: batches per model (default 16)")
    args = ap.parse_args()

    if args.eval:
        generators = {name: calib_fn for name, (_, calib_fn) in MODELS.items()}
        generators["resnet18"] = calib_resnet18
        for name, calib_fn in generators.items():
            d = os.path.join(args.eval, name)
            os.makedirs(d, exist_ok=True)
            for i in range(args.eval_batches):
                save_npz(os.path.join(d, f"batch_{i:03d}.npz"), calib_fn(1000 + i))
        print(f"wrote {args.eval_batches} evaluation batches per model under {args.eval}")
        return 0

    if args.resnet18:
        print(f"building ResNet-18 -> {args.resnet18}")
        m = build_resnet18()
        d = os.path.dirname(os.path.abspath(args.resnet18))
        os.makedirs(d, exist_ok=True)
        save_model(m, args.resnet18)
        print(f"  {os.path.getsize(args.resnet18)} bytes")
        if args.resnet18_calib:
            write_calib(calib_resnet18, args.resnet18_calib)
        if not args.no_verify:
            verify(args.resnet18, calib_resnet18(0))
        return 0

    os.makedirs(args.out, exist_ok=True)
    for name, (build, calib_fn) in MODELS.items():
        path = os.path.join(args.out, name + ".onnx")
        print(f"building {name} -> {path}")
        save_model(build(), path)
        print(f"  {os.path.getsize(path)} bytes")
        calib_dir = os.path.join(args.out, name + "_calib")
        write_calib(calib_fn, calib_dir)
        if not args.no_verify:
            expected_dir = os.path.join(args.out, name + "_expected")
            os.makedirs(expected_dir, exist_ok=True)
            verify(path, calib_fn(0), os.path.join(expected_dir, "batch_000.npz"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
