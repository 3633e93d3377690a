#!/usr/bin/env python3
"""Checks mppq's Caffe frontend against a real Caffe runtime (OpenCV's dnn module).

    python xtask/python/caffe_check.py --converter target/debug/examples/caffe_to_onnx [--out testdata/caffe]
    python xtask/python/caffe_check.py --converter ... --model NET.prototxt NET.caffemodel [--input-shape 1,3,300,300]

Needs: numpy, opencv-python-headless, onnxruntime, protobuf, grpcio-tools (for protoc).
Build the converter first: `cargo build -p mppq-onnx --example caffe_to_onnx`.

Default invocation builds small Caffe nets that together cover every layer type the
frontend converts (the prototxt text is written here; the .caffemodel holds seeded
random weights, encoded with a caffe_pb2 generated from our caffe.proto), runs each in
OpenCV dnn on a seeded random input, converts it with the Rust converter, runs the ONNX
in onnxruntime and compares every output: max abs diff <= 1e-4 * max|reference| + 1e-5.
With --out it writes, per net, NAME.prototxt, NAME.caffemodel, NAME_input.npz (keys =
input names) and NAME_expected.npz (OpenCV's outputs, keys = output blob names), which
crates/mppq-api/tests/caffe.rs checks against our executor without Python.

--model checks one existing net (e.g. a trained model) the same way and prints the result.
With --bvlc-only, layers of types outside BVLC Caffe (SSD's Normalize, Permute, PriorBox,
DetectionOutput, ...) and every layer downstream of them are cut from the prototxt first,
so the rest of a detector (its backbone and head convolutions) can be compared.
"""

import argparse
import io
import os
import subprocess
import sys
import tempfile
import zipfile
import zlib

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROTO = os.path.join(ROOT, "crates", "mppq-onnx", "proto", "caffe")


def caffe_pb2():
    """caffe_pb2 generated from our caffe.proto with grpc_tools' protoc."""
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="caffe_pb2_")
    rc = protoc.main(["protoc", f"-I{PROTO}", f"--python_out={out}", os.path.join(PROTO, "caffe.proto")])
    if rc != 0:
        sys.exit("protoc failed on caffe.proto")
    sys.path.insert(0, out)
    import caffe_pb2 as pb  # noqa: E402

    return pb


def save_npz(path, arrays):
    """Like np.savez, but byte-deterministic (fixed zip timestamps, sorted keys)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            data = io.BytesIO()
            np.lib.format.write_array(data, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            zf.writestr(info, data.getvalue())
    with open(path, "wb") as f:
        f.write(buf.getvalue())


class Net:
    """A test net: prototxt text and the shapes of each layer's blobs."""

    def __init__(self, name, inputs, legacy_input=False):
        self.name = name
        self.inputs = inputs  # {blob: shape}
        self.layers = []  # (name, text, blob shapes, blob kinds)
        self.legacy_input = legacy_input

    def layer(self, name, ltype, bottoms, tops, params="", blobs=(), kinds=None):
        lines = [f'layer {{ name: "{name}" type: "{ltype}"']
        lines += [f'  bottom: "{b}"' for b in bottoms]
        lines += [f'  top: "{t}"' for t in tops]
        if params:
            lines.append("  " + params)
        lines.append("}")
        self.layers.append((name, "\n".join(lines), list(blobs), kinds))
        return self

    def prototxt(self):
        head = [f'name: "{self.name}"']
        if self.legacy_input:
            for blob, shape in self.inputs.items():
                head.append(f'input: "{blob}"')
                head += [f"input_dim: {d}" for d in shape]
        else:
            for blob, shape in self.inputs.items():
                dims = " ".join(f"dim: {d}" for d in shape)
                head.append(f'layer {{ name: "{blob}" type: "Input" top: "{blob}" input_param {{ shape {{ {dims} }} }} }}')
        return "\n".join(head + [text for _, text, _, _ in self.layers]) + "\n"

    def caffemodel(self, pb, rng):
        net = pb.NetParameter()
        net.name = self.name
        for name, _, shapes, kinds in self.layers:
            if not shapes:
                continue
            layer = net.layer.add()
            layer.name = name
            for i, shape in enumerate(shapes):
                kind = (kinds or {}).get(i, "normal")
                if kind == "positive":
                    values = rng.uniform(0.5, 1.5, size=shape)
                elif kind == "factor":
                    values = np.full(shape, 2.0)
                else:
                    values = rng.normal(0.0, 0.5, size=shape)
                blob = layer.blobs.add()
                blob.shape.dim.extend(shape)
                blob.data.extend(values.astype(np.float32).ravel().tolist())
        return net.SerializeToString()


def test_nets():
    nets = []
    n = Net("conv_inplace", {"data": (2, 4, 11, 11)})
    n.layer("conv1", "Convolution", ["data"], ["conv1"],
            "convolution_param { num_output: 6 kernel_size: 3 pad: 1 stride: 2 }", [(6, 4, 3, 3), (6,)])
    n.layer("relu1", "ReLU", ["conv1"], ["conv1"])
    n.layer("conv2", "Convolution", ["conv1"], ["conv2"],
            "convolution_param { num_output: 4 kernel_h: 3 kernel_w: 2 pad_h: 2 pad_w: 1 stride_h: 1 stride_w: 2 "
            "dilation: 2 group: 2 bias_term: false }", [(4, 3, 3, 2)])
    n.layer("relu2", "ReLU", ["conv2"], ["conv2"], "relu_param { negative_slope: 0.1 }")
    n.layer("fc", "InnerProduct", ["conv2"], ["fc"], "inner_product_param { num_output: 5 }", [(5, 4 * 6 * 3), (5,)])
    n.layer("prob", "Softmax", ["fc"], ["prob"])
    nets.append(n)

    n = Net("pooling", {"data": (1, 3, 8, 9)})
    n.layer("max_ceil", "Pooling", ["data"], ["max_ceil"], "pooling_param { pool: MAX kernel_size: 3 stride: 2 }")
    n.layer("ave_pad", "Pooling", ["data"], ["ave_pad"], "pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }")
    n.layer("ave_clip", "Pooling", ["data"], ["ave_clip"], "pooling_param { pool: AVE kernel_size: 2 stride: 2 pad: 1 }")
    n.layer("max_hw", "Pooling", ["data"], ["max_hw"],
            "pooling_param { pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 3 pad_h: 1 pad_w: 1 }")
    n.layer("ave_nopad", "Pooling", ["data"], ["ave_nopad"], "pooling_param { pool: AVE kernel_size: 3 stride: 3 }")
    n.layer("gap", "Pooling", ["data"], ["gap"], "pooling_param { pool: AVE global_pooling: true }")
    n.layer("gmp", "Pooling", ["data"], ["gmp"], "pooling_param { pool: MAX global_pooling: true }")
    nets.append(n)

    n = Net("batchnorm_scale", {"data": (2, 3, 5, 5)})
    n.layer("conv", "Convolution", ["data"], ["conv"], "convolution_param { num_output: 4 kernel_size: 1 }",
            [(4, 3, 1, 1), (4,)])
    n.layer("bn", "BatchNorm", ["conv"], ["conv"], "batch_norm_param { use_global_stats: true eps: 0.001 }",
            [(4,), (4,), (1,)], {1: "positive", 2: "factor"})
    n.layer("scale", "Scale", ["conv"], ["conv"], "scale_param { bias_term: true }", [(4,), (4,)])
    n.layer("relu", "ReLU", ["conv"], ["conv"])
    n.layer("scale_hw", "Scale", ["conv"], ["scale_hw"], "scale_param { axis: 2 num_axes: 2 }", [(5, 5)])
    n.layer("fc", "InnerProduct", ["scale_hw"], ["fc"], "inner_product_param { num_output: 6 }", [(6, 100), (6,)])
    n.layer("bn_fc", "BatchNorm", ["fc"], ["bn_fc"], "", [(6,), (6,), (1,)], {1: "positive", 2: "factor"})
    nets.append(n)

    n = Net("eltwise_concat", {"data": (1, 4, 6, 6)})
    n.layer("a", "Convolution", ["data"], ["a"], "convolution_param { num_output: 4 kernel_size: 3 pad: 1 }",
            [(4, 4, 3, 3), (4,)])
    n.layer("sum", "Eltwise", ["a", "data"], ["sum"], "eltwise_param { operation: SUM coeff: 0.5 coeff: -1.5 }")
    n.layer("plain_sum", "Eltwise", ["a", "data", "sum"], ["plain_sum"])
    n.layer("prod", "Eltwise", ["a", "data"], ["prod"], "eltwise_param { operation: PROD }")
    n.layer("max", "Eltwise", ["sum", "prod"], ["max"], "eltwise_param { operation: MAX }")
    n.layer("cat", "Concat", ["max", "a", "plain_sum"], ["cat"])
    n.layer("cat_w", "Concat", ["cat", "cat"], ["cat_w"], "concat_param { axis: -1 }")
    nets.append(n)

    n = Net("deconv", {"data": (1, 4, 5, 4)})
    n.layer("up", "Deconvolution", ["data"], ["up"],
            "convolution_param { num_output: 3 kernel_size: 4 stride: 2 pad: 1 }", [(4, 3, 4, 4), (3,)])
    n.layer("up_g", "Deconvolution", ["data"], ["up_g"],
            "convolution_param { num_output: 4 kernel_size: 3 stride: 1 group: 2 bias_term: false }", [(4, 2, 3, 3)])
    nets.append(n)

    n = Net("activations", {"data": (1, 3, 4, 4)})
    n.layer("prelu", "PReLU", ["data"], ["prelu"], "", [(3,)])
    n.layer("prelu_shared", "PReLU", ["data"], ["prelu_shared"], "prelu_param { channel_shared: true }", [(1,)])
    n.layer("sigmoid", "Sigmoid", ["prelu"], ["sigmoid"])
    n.layer("tanh", "TanH", ["prelu_shared"], ["tanh"])
    n.layer("elu", "ELU", ["data"], ["elu"], "elu_param { alpha: 0.7 }")
    n.layer("abs", "AbsVal", ["data"], ["abs"])
    n.layer("bnll", "BNLL", ["data"], ["bnll"])
    n.layer("power", "Power", ["abs"], ["power"], "power_param { power: 2 scale: 0.5 shift: 1.0 }")
    n.layer("drop", "Dropout", ["power"], ["power"], "dropout_param { dropout_ratio: 0.3 }")
    n.layer("drop_out", "Dropout", ["bnll"], ["bnll_drop"])
    n.layer("sum", "Eltwise", ["power", "bnll_drop", "elu", "sigmoid", "tanh"], ["sum"])
    nets.append(n)

    n = Net("shapes", {"data": (2, 6, 3, 4)})
    n.layer("slice", "Slice", ["data"], ["s0", "s1", "s2"], "slice_param { axis: 1 slice_point: 1 slice_point: 4 }")
    n.layer("split", "Split", ["s1"], ["s1a", "s1b"])
    n.layer("sig", "Sigmoid", ["s1a"], ["sig"])
    n.layer("mul", "Eltwise", ["sig", "s1b"], ["mul"], "eltwise_param { operation: PROD }")
    n.layer("flat", "Flatten", ["mul"], ["flat"])
    n.layer("reshape", "Reshape", ["s2"], ["reshape"], "reshape_param { shape { dim: 0 dim: -1 dim: 4 } }")
    # OpenCV ignores InnerProduct's `transpose` (it reads the blob as N x K), so it is checked
    # against numpy in crates/mppq-onnx/tests/caffe.rs's structure test and --transpose-check.
    n.layer("ip_axis2", "InnerProduct", ["reshape"], ["ip_axis2"],
            "inner_product_param { num_output: 3 axis: 2 }", [(3, 4), (3,)])
    n.layer("softmax2", "Softmax", ["ip_axis2"], ["softmax2"], "softmax_param { axis: 2 }")
    n.layer("flat_mid", "Flatten", ["s0"], ["flat_mid"], "flatten_param { axis: 1 end_axis: 2 }")
    n.layer("tanh0", "TanH", ["flat_mid"], ["tanh0"])
    n.layer("slice_eq", "Slice", ["flat"], ["h0", "h1"], "slice_param { axis: 1 }")
    n.layer("sum_h", "Eltwise", ["h0", "h1"], ["sum_h"])
    nets.append(n)

    n = Net("lrn", {"data": (1, 7, 4, 4)})
    # OpenCV ignores `k` (uses 1) and defaults alpha to 1e-4 where Caffe's schema says 1: the
    # test nets set alpha and leave k at 1, so both runtimes compute Caffe's formula.
    n.layer("lrn", "LRN", ["data"], ["lrn"], "lrn_param { local_size: 5 alpha: 0.5 beta: 0.75 }")
    n.layer("lrn3", "LRN", ["data"], ["lrn3"], "lrn_param { local_size: 3 alpha: 0.0001 beta: 0.6 k: 1 }")
    nets.append(n)

    n = Net("legacy_input", {"data": (1, 2, 5, 5)}, legacy_input=True)
    n.layer("conv", "Convolution", ["data"], ["conv"], "convolution_param { num_output: 2 kernel_size: 3 }",
            [(2, 2, 3, 3), (2,)])
    n.layer("relu", "ReLU", ["conv"], ["conv"])
    nets.append(n)
    return nets


BVLC_TYPES = {
    "Input", "Convolution", "Deconvolution", "Pooling", "InnerProduct", "ReLU", "PReLU", "ELU", "Sigmoid",
    "TanH", "AbsVal", "BNLL", "Power", "Clip", "BatchNorm", "Scale", "Eltwise", "Concat", "Slice", "Split",
    "Softmax", "Flatten", "Reshape", "Dropout", "LRN", "Silence",
}


def bvlc_only(text):
    """The prototxt without the layers of non-BVLC types and those that read their tops."""
    import re

    head, blocks, depth, start = [], [], 0, None
    i = 0
    while i < len(text):
        if depth == 0 and text.startswith("layer {", i):
            start, depth = i, 1
            i += len("layer {")
            continue
        c = text[i]
        if depth:
            depth += (c == "{") - (c == "}")
            if depth == 0:
                blocks.append(text[start : i + 1])
        else:
            head.append(c)
        i += 1
    kept, dropped, cut = [], [], set()
    for block in blocks:
        ltype = re.search(r'^\s*type:\s*"([^"]+)"', block, re.M).group(1)
        bottoms = re.findall(r'^\s*bottom:\s*"([^"]+)"', block, re.M)
        tops = re.findall(r'^\s*top:\s*"([^"]+)"', block, re.M)
        if ltype not in BVLC_TYPES or any(b in cut for b in bottoms):
            cut.update(tops)
            dropped.append(ltype)
        else:
            kept.append(block)
    print(f"--bvlc-only: kept {len(kept)} layers, cut {len(dropped)}: " + ", ".join(sorted(set(dropped))))
    return "".join(head) + "\n".join(kept) + "\n"


def opencv_run(prototxt, caffemodel, feeds):
    import cv2

    net = cv2.dnn.readNetFromCaffe(prototxt, caffemodel)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    if hasattr(net, "enableWinograd"):
        net.enableWinograd(False)
    for name, value in feeds.items():
        net.setInput(value, name)
    names = list(net.getUnconnectedOutLayersNames())
    outs = net.forward(names)
    return dict(zip(names, outs))


def layer_tops(prototxt_text):
    """Layer name -> its first top, read from the prototxt with our caffe_pb2."""
    from google.protobuf import text_format

    net = text_format.Parse(prototxt_text, PB.NetParameter())
    return {l.name: l.top[0] for l in net.layer if l.top}


def ort_run(onnx_path, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def convert(converter, prototxt, caffemodel, onnx_path):
    r = subprocess.run([converter, prototxt, caffemodel, onnx_path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())


def compare(prototxt, caffemodel, feeds, converter, tmp):
    """OpenCV's outputs (by output blob name) and the worst relative difference of ORT's."""
    with open(prototxt) as f:
        tops = layer_tops(f.read())
    ref = {tops.get(layer, layer): v for layer, v in opencv_run(prototxt, caffemodel, feeds).items()}
    onnx_path = os.path.join(tmp, "net.onnx")
    convert(converter, prototxt, caffemodel, onnx_path)
    got = ort_run(onnx_path, feeds)
    report = {}
    for name, want in ref.items():
        if name not in got:
            raise RuntimeError(f"ONNX lacks output {name} (has {sorted(got)})")
        g = got[name]
        if g.shape != want.shape:
            raise RuntimeError(f"{name}: shape {g.shape} vs OpenCV {want.shape}")
        scale = float(np.abs(want).max())
        diff = float(np.abs(g - want).max())
        report[name] = (diff, scale, diff <= 1e-4 * scale + 1e-5)
    return ref, report


def main():
    global PB
    ap = argparse.ArgumentParser()
    ap.add_argument("--converter", default=os.path.join(ROOT, "target", "debug", "examples", "caffe_to_onnx"))
    ap.add_argument("--out", help="write the nets and OpenCV's outputs here (testdata/caffe)")
    ap.add_argument("--model", nargs=2, metavar=("PROTOTXT", "CAFFEMODEL"))
    ap.add_argument("--input-shape", help="input shape for --model, e.g. 1,3,300,300")
    ap.add_argument("--bvlc-only", action="store_true", help="with --model: cut non-BVLC layers first")
    args = ap.parse_args()
    PB = caffe_pb2()
    tmp = tempfile.mkdtemp(prefix="caffe_check_")
    failed = 0
    if args.model:
        shape = tuple(int(d) for d in args.input_shape.split(","))
        rng = np.random.default_rng(0)
        feeds = {"data": rng.uniform(-1, 1, size=shape).astype(np.float32)}
        prototxt = args.model[0]
        if args.bvlc_only:
            with open(prototxt) as f:
                pruned = bvlc_only(f.read())
            prototxt = os.path.join(tmp, "bvlc_only.prototxt")
            with open(prototxt, "w") as f:
                f.write(pruned)
        _, report = compare(prototxt, args.model[1], feeds, args.converter, tmp)
        for name, (diff, scale, ok) in report.items():
            print(f"{name}: max abs diff {diff:.3g} (output scale {scale:.3g}) {'ok' if ok else 'FAIL'}")
            failed += not ok
        sys.exit(1 if failed else 0)
    for net in test_nets():
        rng = np.random.default_rng(zlib.crc32(net.name.encode()))
        prototxt = os.path.join(tmp, net.name + ".prototxt")
        caffemodel = os.path.join(tmp, net.name + ".caffemodel")
        with open(prototxt, "w") as f:
            f.write(net.prototxt())
        with open(caffemodel, "wb") as f:
            f.write(net.caffemodel(PB, rng))
        feeds = {k: rng.normal(0, 1, size=s).astype(np.float32) for k, s in net.inputs.items()}
        try:
            ref, report = compare(prototxt, caffemodel, feeds, args.converter, tmp)
        except Exception as e:  # report and go on with the other nets
            print(f"{net.name}: ERROR {e}")
            failed += 1
            continue
        for name, (diff, scale, ok) in report.items():
            print(f"{net.name}/{name}: max abs diff {diff:.3g} (output scale {scale:.3g}) {'ok' if ok else 'FAIL'}")
            failed += not ok
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            for ext in (".prototxt", ".caffemodel"):
                with open(os.path.join(tmp, net.name + ext), "rb") as src, open(os.path.join(args.out, net.name + ext), "wb") as dst:
                    dst.write(src.read())
            save_npz(os.path.join(args.out, net.name + "_input.npz"), feeds)
            save_npz(os.path.join(args.out, net.name + "_expected.npz"), ref)
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
