#!/usr/bin/env python3
"""Write single-operator models at old opsets, for the operators whose form or meaning changed
(what `cargo xtask opset-upgrade` converts), in ONNX's backend-test layout:

    OUT/<case>/model.onnx
    OUT/<case>/test_data_set_0/input_<i>.pb, output_<i>.pb

The expected outputs come from ONNX Runtime running the original (old-opset) model, or from a
NumPy reference where ORT has no kernel for the old form (legacy broadcasting at opset 6, the
experimental ImageScaler). A case neither can compute is skipped. Prints one line per case.

Usage: gen_old_opset.py OUT_DIR
"""
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

RNG = np.random.default_rng(2024)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


CASES = []


def case(name, op, opset, inputs, attrs=None, inits=(), outputs=1, declare=True, reference=None):
    """inputs: list of (name, array); inits: list of (name, array) initializers read after the
    inputs; declare: give the graph inputs their shapes (else rank unknown)."""
    CASES.append(dict(name=name, op=op, opset=opset, inputs=inputs, attrs=attrs or {}, inits=list(inits),
                      outputs=outputs, declare=declare, reference=reference))


def build():
    x4 = rand(2, 3, 4, 5)
    x3 = rand(2, 3, 4)
    # Softmax family before 13: 2-D coercion at `axis` (default 1).
    for op in ["Softmax", "LogSoftmax", "Hardmax"]:
        for opset in [11, 12]:
            for axis, x in [(None, x4), (1, x3), (1, x4), (2, x4), (3, x4), (-1, x3), (0, x3[0]), (-2, x4)]:
                for declare in [True, False]:
                    tag = "default" if axis is None else str(axis).replace("-", "m")
                    attrs = {} if axis is None else {"axis": axis}
                    case(f"{op.lower()}_{opset}_axis{tag}_rank{x.ndim}_{'shape' if declare else 'noshape'}",
                         op, opset, [("x", x)], attrs, declare=declare)
    # Squeeze / Unsqueeze / Split / ReduceSum before 13; the other reductions before 18.
    for opset in [11, 12]:
        case(f"squeeze_{opset}", "Squeeze", opset, [("x", rand(1, 3, 1, 5))], {"axes": [0, 2]})
        case(f"squeeze_{opset}_negative", "Squeeze", opset, [("x", rand(3, 1))], {"axes": [-1]})
        case(f"squeeze_{opset}_all", "Squeeze", opset, [("x", rand(1, 3, 1))])
        case(f"unsqueeze_{opset}", "Unsqueeze", opset, [("x", rand(3, 4))], {"axes": [0, 3]})
        case(f"split_{opset}_attr", "Split", opset, [("x", rand(2, 6))], {"axis": 1, "split": [1, 2, 3]}, outputs=3)
        case(f"split_{opset}_equal", "Split", opset, [("x", rand(4, 6))], {"axis": 0}, outputs=2)
    reductions = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                  "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
    for op in reductions:
        for opset in [11, 13]:
            if op == "ReduceSum" and opset == 13:
                continue
            x = np.abs(rand(2, 3, 4)) + 0.5
            case(f"{op.lower()}_{opset}_axes", op, opset, [("x", x)], {"axes": [1, -1], "keepdims": 1})
            case(f"{op.lower()}_{opset}_axes_nokeep", op, opset, [("x", x)], {"axes": [0], "keepdims": 0})
            case(f"{op.lower()}_{opset}_all", op, opset, [("x", x)], {"keepdims": 0})
    # Clip before 11.
    for opset in [6, 10]:
        x = rand(3, 4) * 3
        case(f"clip_{opset}_both", "Clip", opset, [("x", x)], {"min": -1.0, "max": 0.5})
        case(f"clip_{opset}_max", "Clip", opset, [("x", x)], {"max": 0.5})
        case(f"clip_{opset}_min", "Clip", opset, [("x", x)], {"min": -0.5})
        case(f"clip_{opset}_none", "Clip", opset, [("x", x)])
    # Pad before 11.
    for opset in [2, 10]:
        x = rand(1, 2, 3, 4)
        case(f"pad_{opset}_constant", "Pad", opset, [("x", x)], {"pads": [0, 0, 1, 2, 0, 0, 2, 1], "value": 1.5})
        case(f"pad_{opset}_constant_default", "Pad", opset, [("x", x)], {"pads": [0, 1, 0, 0, 0, 0, 1, 0]})
        case(f"pad_{opset}_reflect", "Pad", opset, [("x", x)], {"pads": [0, 0, 1, 2, 0, 0, 2, 1], "mode": "reflect"})
        case(f"pad_{opset}_edge", "Pad", opset, [("x", x)], {"pads": [0, 0, 1, 0, 0, 0, 0, 3], "mode": "edge"})
    # Slice before 10.
    for opset in [1, 9]:
        x = rand(3, 4, 5)
        case(f"slice_{opset}_axes", "Slice", opset, [("x", x)], {"starts": [1, 0], "ends": [3, -1], "axes": [0, 2]})
        case(f"slice_{opset}_noaxes", "Slice", opset, [("x", x)], {"starts": [0, 1], "ends": [2, 1000]})
        case(f"slice_{opset}_negative", "Slice", opset, [("x", x)], {"starts": [-2], "ends": [2**62], "axes": [1]})
    # TopK before 10.
    for opset in [1, 9]:
        case(f"topk_{opset}", "TopK", opset, [("x", rand(3, 6))], {"k": 2}, outputs=2)
        case(f"topk_{opset}_axis0", "TopK", opset, [("x", rand(5, 2))], {"k": 3, "axis": 0}, outputs=2)
    # Upsample (7: scales attribute; 9: input) and Resize-10 → Resize.
    x = rand(1, 2, 3, 4)
    for mode in ["nearest", "linear"]:
        for scales in [[1, 1, 2, 2], [1, 1, 2, 3], [1, 1, 1.5, 2.5]]:
            tag = "x".join(str(s).replace(".", "p") for s in scales[2:])
            case(f"upsample_7_{mode}_{tag}", "Upsample", 7, [("x", x)], {"mode": mode, "scales": [float(s) for s in scales]})
            case(f"upsample_9_{mode}_{tag}", "Upsample", 9, [("x", x)], {"mode": mode},
                 inits=[("scales", np.array(scales, np.float32))])
        for scales in [[1, 1, 2, 2], [1, 1, 0.5, 0.5], [1, 1, 0.6, 0.7], [1, 1, 1.7, 3]]:
            tag = "x".join(str(s).replace(".", "p") for s in scales[2:])
            case(f"resize_10_{mode}_{tag}", "Resize", 10, [("x", x)], {"mode": mode},
                 inits=[("scales", np.array(scales, np.float32))])
    # Resize-11's tf_half_pixel_for_nn (removed at 13).
    for rounding in ["floor", "round_prefer_floor"]:
        for scales in [[1, 1, 2, 2], [1, 1, 0.6, 1.5], [1, 1, 3, 0.5]]:
            tag = "x".join(str(s).replace(".", "p") for s in scales[2:])
            case(f"resize_11_tf_half_pixel_{rounding}_{tag}", "Resize", 11, [("x", x)],
                 {"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn", "nearest_mode": rounding},
                 inits=[("roi", np.zeros(0, np.float32)), ("scales", np.array(scales, np.float32))])
    # Dropout, BatchNormalization, Scatter.
    case("dropout_7_ratio", "Dropout", 7, [("x", rand(3, 4))], {"ratio": 0.3})
    case("dropout_10_ratio", "Dropout", 10, [("x", rand(3, 4))], {"ratio": 0.3})
    c = 3
    bn = [("scale", rand(c)), ("bias", rand(c)), ("mean", rand(c)), ("var", np.abs(rand(c)) + 0.5)]
    case("batchnorm_7_spatial", "BatchNormalization", 7, [("x", rand(2, c, 4, 4))], {"spatial": 1, "epsilon": 1e-3},
         inits=bn)
    case("batchnorm_8", "BatchNormalization", 8, [("x", rand(2, c, 4))], {}, inits=bn)
    data = rand(3, 4)
    case("scatter_9", "Scatter", 9, [("data", data)], {"axis": 1},
         inits=[("indices", np.array([[1, 3], [0, 2], [3, 3]], np.int64)), ("updates", rand(3, 2))])
    case("scatter_10_axis0", "Scatter", 10, [("data", data)], {"axis": 0},
         inits=[("indices", np.array([[2, 0, 1, 0]], np.int64)), ("updates", rand(1, 4))])
    # Legacy broadcasting (opset 6): B aligned at `axis`; ORT has no opset-6 kernel, NumPy computes it.
    a = rand(2, 3, 4, 5)
    for op, f in [("Add", np.add), ("Mul", np.multiply), ("Sub", np.subtract), ("Div", np.divide)]:
        for axis, b in [(1, rand(3, 4)), (1, rand(3)), (0, rand(2)), (2, rand(4, 5))]:
            trailing = a.ndim - axis - b.ndim
            ref = (lambda f, b, t: (lambda a: f(a, b.reshape(b.shape + (1,) * t))))(f, b, trailing)
            case(f"{op.lower()}_6_broadcast_axis{axis}_rank{b.ndim}", op, 6, [("a", a)],
                 {"broadcast": 1, "axis": axis}, inits=[("b", b)], reference=ref)
        b = rand(4, 5)
        case(f"{op.lower()}_6_broadcast_suffix", op, 6, [("a", a)], {"broadcast": 1}, inits=[("b", b)],
             reference=(lambda f, b: (lambda a: f(a, b)))(f, b))
    # ImageScaler (experimental, removed at 10).
    bias = [0.5, -1.0, 2.0]
    case("imagescaler_8", "ImageScaler", 8, [("x", rand(2, 3, 4, 4))], {"scale": 0.25, "bias": bias},
         reference=lambda x: 0.25 * x + np.array(bias, np.float32).reshape(1, 3, 1, 1))
    # GroupNormalization-18 → 21 (per-group scale and bias).
    for declare in [True, False]:
        case(f"groupnorm_18_{'shape' if declare else 'noshape'}", "GroupNormalization", 18, [("x", rand(2, 4, 3, 3))],
             {"num_groups": 2, "epsilon": 1e-5}, inits=[("scale", rand(2)), ("bias", rand(2))], declare=declare)


def make_model(c):
    ins = [h.make_tensor_value_info(n, T.FLOAT, list(v.shape) if c["declare"] else None) for n, v in c["inputs"]]
    inits = [numpy_helper.from_array(v, n) for n, v in c["inits"]]
    outs = [f"y{i}" for i in range(c["outputs"])]
    node = h.make_node(c["op"], [n for n, _ in c["inputs"]] + [n for n, _ in c["inits"]], outs, name=c["name"],
                       **c["attrs"])
    types = [T.INT64 if c["op"] == "TopK" and i == 1 else T.FLOAT for i in range(len(outs))]
    out_info = [h.make_tensor_value_info(o, t, None) for o, t in zip(outs, types)]
    graph = h.make_graph([node], c["name"], ins, out_info, inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", c["opset"])])
    model.ir_version = 7 if c["opset"] >= 12 else 6 if c["opset"] == 11 else 5 if c["opset"] == 10 else 4 if c["opset"] == 9 else 3
    if c["opset"] >= 18:
        model.ir_version = 8
    return model


def run_ort(model, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def main() -> int:
    out = sys.argv[1]
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    build()
    written = 0
    for c in CASES:
        model = make_model(c)
        feeds = {n: v for n, v in c["inputs"]}
        try:
            outputs = run_ort(model, feeds)
            source = "ort"
        except Exception as e:  # noqa: BLE001 - ORT may have no kernel for the old form
            if c["reference"] is None:
                print(f"{c['name']}: skipped (ORT: {str(e).splitlines()[0][:120]})")
                continue
            outputs = [c["reference"](*feeds.values())]
            source = "numpy"
        d = os.path.join(out, c["name"])
        os.makedirs(os.path.join(d, "test_data_set_0"))
        onnx.save(model, os.path.join(d, "model.onnx"))
        for i, (n, v) in enumerate(c["inputs"]):
            with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(v, n).SerializeToString())
        for i, (o, v) in enumerate(zip(model.graph.output, outputs)):
            with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(v), o.name).SerializeToString())
        print(f"{c['name']}: {source}")
        written += 1
    print(f"{written} cases written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
