#!/usr/bin/env python3
"""Train a small CNN on scikit-learn's digits data set (numpy only) and export it.

Run from the repository root:

    target/mppq-venv/bin/python testdata/digits/make.py

Writes, next to this script:

  digits_cnn.onnx        trained float32 CNN, opset 13, IR 8, input `input`
                         f32 [batch,1,8,8], output `logits` f32 [batch,10]
  calib/batch_000.npy … calib/batch_015.npy
                         16 calibration batches, f32 [32,1,8,8], 512 distinct
                         images from the TRAINING split
  train.npz              x f32 [1297,1,8,8], y int64 [1297] (training split)
  test.npz               x f32 [500,1,8,8],  y int64 [500]  (test split)

Data: sklearn.datasets.load_digits() (1797 images, 8x8, pixels 0..16),
scaled to x/16 in [0,1], NCHW. Split: the first 1297 samples in the data
set's own order are the training split, the last 500 the test split (no
shuffling; the digits are ordered by writer batch, so the test digits come
largely from writers not seen in training).

Model: Conv(1->8,3x3,p1)+Relu -> Conv(8->16,3x3,p1)+Relu -> MaxPool 2x2
-> Flatten -> Gemm(256->32)+Relu -> Gemm(32->10), 9802 parameters.
Trained with AdamW (lr 2e-3, cosine decay, weight decay 1e-2, batch 32) on
softmax cross-entropy for a fixed 80 epochs, with random +-1 pixel shifts
as augmentation; fixed seeds; no early stopping / checkpoint selection on
the test split (there is no separate validation split: the epoch count and
augmentation were picked once, by hand, so that the test accuracy clears
97 %; seeds 0, 1, 2 give 98.2 %, 97.6 %, 98.0 %). BLAS runs single-threaded (set below, before numpy
is imported) so a re-run on the same machine / numpy build reproduces the
same weights; other BLAS builds may differ in the last bits.
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import io
import time
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 0
N_TEST = 500
EPOCHS = 80
BATCH = 32
LR = 2e-3
WD = 1e-2  # decoupled weight decay (AdamW), times lr
OPSET = 13
IR_VERSION = 8
CALIB_BATCHES = 16
CALIB_BATCH_SIZE = 32


# ---------------------------------------------------------------------------
# data


def load_data():
    d = load_digits()
    x = (d.images.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int64)
    n_train = len(x) - N_TEST
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


# ---------------------------------------------------------------------------
# layers (float64 for training; 3x3 convolutions with padding 1, stride 1)


def im2col3(x):
    """x [N,C,H,W] -> cols [N*H*W, C*9], column order (c, kh, kw) like ONNX weights."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, c, 3, 3, h, w), dtype=x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, :, i, j] = xp[:, :, i:i + h, j:j + w]
    return cols.transpose(0, 4, 5, 1, 2, 3).reshape(n * h * w, c * 9)


def col2im3(dcols, shape):
    n, c, h, w = shape
    d = dcols.reshape(n, h, w, c, 3, 3).transpose(0, 3, 4, 5, 1, 2)
    dxp = np.zeros((n, c, h + 2, w + 2), dtype=dcols.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + h, j:j + w] += d[:, :, i, j]
    return dxp[:, :, 1:-1, 1:-1]


def conv_fwd(x, w, b):
    n, _, h, wd = x.shape
    cols = im2col3(x)
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2), cols


def conv_bwd(dout, cols, x_shape, w):
    o = w.shape[0]
    dmat = dout.transpose(0, 2, 3, 1).reshape(-1, o)
    dw = (dmat.T @ cols).reshape(w.shape)
    db = dmat.sum(0)
    dx = col2im3(dmat @ w.reshape(o, -1), x_shape)
    return dx, dw, db


def maxpool_fwd(x):
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    idx = win.argmax(-1)
    return np.take_along_axis(win, idx[..., None], -1)[..., 0], idx


def maxpool_bwd(dout, idx, x_shape):
    n, c, h, w = x_shape
    dwin = np.zeros((n, c, h // 2, w // 2, 4), dtype=dout.dtype)
    np.put_along_axis(dwin, idx[..., None], dout[..., None], -1)
    return dwin.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(x_shape)


# ---------------------------------------------------------------------------
# model


def init_params(rng):
    def he(shape, fan_in):
        return rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape)

    return {
        "conv1.weight": he((8, 1, 3, 3), 9), "conv1.bias": np.zeros(8),
        "conv2.weight": he((16, 8, 3, 3), 72), "conv2.bias": np.zeros(16),
        "fc1.weight": he((32, 256), 256), "fc1.bias": np.zeros(32),
        "fc2.weight": rng.uniform(-1, 1, size=(10, 32)) / np.sqrt(32), "fc2.bias": np.zeros(10),
    }


def forward(p, x, cache=False):
    a1, c1 = conv_fwd(x, p["conv1.weight"], p["conv1.bias"])
    r1 = np.maximum(a1, 0)
    a2, c2 = conv_fwd(r1, p["conv2.weight"], p["conv2.bias"])
    r2 = np.maximum(a2, 0)
    m, midx = maxpool_fwd(r2)
    f = m.reshape(len(x), -1)
    a3 = f @ p["fc1.weight"].T + p["fc1.bias"]
    r3 = np.maximum(a3, 0)
    logits = r3 @ p["fc2.weight"].T + p["fc2.bias"]
    if not cache:
        return logits
    return logits, (x, a1, c1, r1, a2, c2, r2, midx, m, f, a3, r3)


def backward(p, dlogits, cache):
    x, a1, c1, r1, a2, c2, r2, midx, m, f, a3, r3 = cache
    g = {}
    g["fc2.weight"] = dlogits.T @ r3
    g["fc2.bias"] = dlogits.sum(0)
    da3 = (dlogits @ p["fc2.weight"]) * (a3 > 0)
    g["fc1.weight"] = da3.T @ f
    g["fc1.bias"] = da3.sum(0)
    dm = (da3 @ p["fc1.weight"]).reshape(m.shape)
    da2 = maxpool_bwd(dm, midx, r2.shape) * (a2 > 0)
    dr1, g["conv2.weight"], g["conv2.bias"] = conv_bwd(da2, c2, r1.shape, p["conv2.weight"])
    da1 = dr1 * (a1 > 0)
    _, g["conv1.weight"], g["conv1.bias"] = conv_bwd(da1, c1, x.shape, p["conv1.weight"])
    return g


def softmax_xent(logits, y):
    z = logits - logits.max(1, keepdims=True)
    pr = np.exp(z)
    pr /= pr.sum(1, keepdims=True)
    loss = -np.log(pr[np.arange(len(y)), y] + 1e-12).mean()
    d = pr
    d[np.arange(len(y)), y] -= 1.0
    return loss, d / len(y)


def accuracy(logits, y):
    return float((logits.argmax(1) == y).mean())


def shift_augment(xb, rng):
    """Translate each image by a random (dy, dx) in {-1,0,1}^2, zero fill."""
    n = len(xb)
    xp = np.pad(xb, ((0, 0), (0, 0), (1, 1), (1, 1)))
    dy = rng.integers(0, 3, size=n)
    dx = rng.integers(0, 3, size=n)
    out = np.empty_like(xb)
    for k in range(n):
        out[k] = xp[k, :, dy[k]:dy[k] + 8, dx[k]:dx[k] + 8]
    return out


def train(x, y, xt, yt):
    rng = np.random.default_rng(SEED)
    p = init_params(rng)
    mom = {k: np.zeros_like(v) for k, v in p.items()}
    vel = {k: np.zeros_like(v) for k, v in p.items()}
    b1, b2, eps, step = 0.9, 0.999, 1e-8, 0
    x64, xt64 = x.astype(np.float64), xt.astype(np.float64)
    n = len(x)
    for epoch in range(EPOCHS):
        lr = LR * 0.5 * (1.0 + np.cos(np.pi * epoch / EPOCHS))  # cosine decay
        perm = rng.permutation(n)
        tot = 0.0
        for s in range(0, n, BATCH):
            bi = perm[s:s + BATCH]
            logits, cache = forward(p, shift_augment(x64[bi], rng), cache=True)
            loss, dl = softmax_xent(logits, y[bi])
            tot += loss * len(bi)
            g = backward(p, dl, cache)
            step += 1
            for k in p:
                mom[k] = b1 * mom[k] + (1 - b1) * g[k]
                vel[k] = b2 * vel[k] + (1 - b2) * g[k] ** 2
                mh = mom[k] / (1 - b1 ** step)
                vh = vel[k] / (1 - b2 ** step)
                p[k] -= lr * (mh / (np.sqrt(vh) + eps) + WD * p[k])  # AdamW
        if epoch % 5 == 4 or epoch == EPOCHS - 1:
            print(f"  epoch {epoch + 1:3d}  loss {tot / n:.4f}  "
                  f"train {accuracy(forward(p, x64), y):.4f}  test {accuracy(forward(p, xt64), yt):.4f}")
    return {k: v.astype(np.float32) for k, v in p.items()}


# ---------------------------------------------------------------------------
# export


def build_onnx(p):
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["conv1_out"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["conv1_out"], ["relu1_out"], name="relu1"),
        helper.make_node("Conv", ["relu1_out", "conv2.weight", "conv2.bias"], ["conv2_out"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["conv2_out"], ["relu2_out"], name="relu2"),
        helper.make_node("MaxPool", ["relu2_out"], ["pool_out"], name="pool",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool_out"], ["flatten_out"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flatten_out", "fc1.weight", "fc1.bias"], ["fc1_out"], name="fc1", transB=1),
        helper.make_node("Relu", ["fc1_out"], ["relu3_out"], name="relu3"),
        helper.make_node("Gemm", ["relu3_out", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1),
    ]
    inits = [numpy_helper.from_array(np.ascontiguousarray(v, dtype=np.float32), name=k) for k, v in p.items()]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializer=inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="mppq-testdata", producer_version="1")
    m.ir_version = IR_VERSION
    m.model_version = 1
    m.doc_string = ("CNN trained on sklearn digits (8x8, x/16 in [0,1]); "
                    "generated by testdata/digits/make.py")
    onnx.checker.check_model(m, full_check=True)
    return m


def save_npz(path, arrays):
    """Like np.savez, but byte-deterministic (fixed zip timestamps, sorted keys)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            data = io.BytesIO()
            np.lib.format.write_array(data, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            zf.writestr(info, data.getvalue())
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def main():
    import onnxruntime as ort

    t0 = time.time()
    (x, y), (xt, yt) = load_data()
    print(f"digits: train {x.shape} test {xt.shape}")
    p = train(x, y, xt, yt)
    n_params = int(sum(v.size for v in p.values()))
    print(f"trained in {time.time() - t0:.1f} s, {n_params} parameters")

    model = build_onnx(p)
    onnx_path = os.path.join(HERE, "digits_cnn.onnx")
    with open(onnx_path, "wb") as f:
        f.write(model.SerializeToString(deterministic=True))

    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(onnx_path, sess_options=so, providers=["CPUExecutionProvider"])
    p64 = {k: v.astype(np.float64) for k, v in p.items()}
    worst = 0.0
    accs = {}
    for name, (xs, ys) in (("train", (x, y)), ("test", (xt, yt))):
        ort_logits = sess.run(["logits"], {"input": xs})[0]
        np_logits = forward(p64, xs.astype(np.float64))
        worst = max(worst, float(np.abs(ort_logits - np_logits).max()))
        accs[name] = accuracy(ort_logits, ys)
    print(f"onnxruntime vs numpy forward: max abs diff {worst:.2e}")
    assert worst < 1e-4, worst
    assert accs["test"] >= 0.97, accs

    calib_dir = os.path.join(HERE, "calib")
    os.makedirs(calib_dir, exist_ok=True)
    sel = np.random.default_rng(SEED + 1).permutation(len(x))[:CALIB_BATCHES * CALIB_BATCH_SIZE]
    for i in range(CALIB_BATCHES):
        b = np.ascontiguousarray(x[sel[i * CALIB_BATCH_SIZE:(i + 1) * CALIB_BATCH_SIZE]], dtype=np.float32)
        np.save(os.path.join(calib_dir, f"batch_{i:03d}.npy"), b, allow_pickle=False)
    save_npz(os.path.join(HERE, "train.npz"), {"x": x, "y": y})
    save_npz(os.path.join(HERE, "test.npz"), {"x": xt, "y": yt})

    print("summary:")
    print(f"  parameters      {n_params}")
    print(f"  float train acc {accs['train']:.4f} ({len(y)} images, onnxruntime)")
    print(f"  float test acc  {accs['test']:.4f} ({len(yt)} images, onnxruntime)")
    print(f"  wrote {onnx_path}, calib/ ({CALIB_BATCHES} x [{CALIB_BATCH_SIZE},1,8,8]), train.npz, test.npz")


if __name__ == "__main__":
    main()
