#!/usr/bin/env python3
"""Quantize a float model with ONNX Runtime's quantize_static from mppq's calibration cache and
report the activation parameters ORT chose.

Usage:
    ort_calib_cache.py FLOAT.onnx calibration_cache.json quant.json OUT.onnx

ORT loads the cache instead of calibrating (calibration_cache_path, ORT >= 1.31), with the
operator scope mppq quantized (op types and excluded nodes from quant.json; a node mppq quantizes
with an input kept float, such as a MatMul reading a Softmax, is excluded too: ORT's static
mode needs a range for every input of a quantized node; operation types whose outputs mppq keeps
float everywhere, a transformer's MatMuls, have their output quantization excluded). Prints one JSON
object: {"ort": version, "tensors": {name: [scale, zero_point]}} for every per-tensor
QuantizeLinear of an activation in ORT's QDQ model.
"""
import json
import sys

import onnx
import onnxruntime
from onnx import numpy_helper
from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static


def main(argv) -> int:
    float_model, cache, quant_json, out = argv[1:5]
    ops = json.load(open(quant_json))["operations"]
    ranges = json.load(open(cache))["data"]
    model = onnx.load(float_model)
    weights = {t.name for t in model.graph.initializer}
    covered = lambda n: all(i in ranges or i in weights or i == "" for i in n.input)
    mine = [n for n in model.graph.node if ops.get(n.name, {}).get("precision", "fp32") != "fp32" and covered(n)]
    # Operation types whose outputs mppq keeps float everywhere (the linear layers of a
    # transformer): ORT quantizes their inputs only (its OpTypesToExcludeOutputQuantization).
    # Nodes of other types need ranges for their outputs too (ORT's static mode).
    no_output = sorted({n.op_type for n in mine} - {n.op_type for n in mine if all(o in ranges for o in n.output)})
    quantized = {n.name for n in mine if n.op_type in no_output or all(o in ranges for o in n.output)}
    op_types = sorted({n.op_type for n in model.graph.node if n.name in quantized})
    excluded = [n.name for n in model.graph.node if n.name not in quantized]
    quantize_static(
        float_model,
        out,
        calibration_data_reader=None,
        calibration_cache_path=cache,
        calibrate_method=CalibrationMethod.MinMax,
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=op_types,
        nodes_to_exclude=excluded,
        extra_options={"OpTypesToExcludeOutputQuantization": no_output},
    )
    q = onnx.load(out)
    init = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    tensors = {}
    for n in q.graph.node:
        if n.op_type != "QuantizeLinear" or n.input[0] in weights:
            continue
        scale, zero_point = init[n.input[1]], init[n.input[2]]
        if scale.size == 1:
            tensors[n.input[0]] = [float(scale), int(zero_point)]
    print(json.dumps({"ort": onnxruntime.__version__, "tensors": tensors}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
