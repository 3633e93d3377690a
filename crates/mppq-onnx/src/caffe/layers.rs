//! Layer-by-layer conversion: each supported Caffe layer type becomes standard ONNX operations
//! (opset 13) with Caffe's numbers. One function per layer type; [`convert`] picks it.
//!
//! Pooling matches Caffe exactly: the output size is Caffe's (ceil rounding, last window moved
//! back inside), written as explicit end padding of a floor-rounded ONNX pool; MAX ignores padding
//! like Caffe; AVE divides by the window clipped to the *padded* input, which is an explicit `Pad`
//! with zeros followed by an AveragePool that does not count the extra end padding.

use super::convert::{Layer, Net, Value};
use super::error::{CaffeError, Result};
use super::schema::{
    ConvolutionParameter, eltwise_parameter::EltwiseOp, lrn_parameter::NormRegion, pooling_parameter::PoolMethod,
    pooling_parameter::RoundMode,
};
use super::shape::{self, Rounding};
use mppq_ir::Attribute;

/// The layer types [`convert`] handles (besides `Input`, which makes graph inputs).
pub const SUPPORTED_LAYERS: &[&str] = &[
    "Input",
    "Convolution",
    "Deconvolution",
    "Pooling",
    "InnerProduct",
    "ReLU",
    "PReLU",
    "ELU",
    "Sigmoid",
    "TanH",
    "AbsVal",
    "BNLL",
    "Power",
    "Clip",
    "BatchNorm",
    "Scale",
    "Eltwise",
    "Concat",
    "Slice",
    "Split",
    "Softmax",
    "Flatten",
    "Reshape",
    "Dropout",
    "LRN",
    "Silence",
];

/// Layers whose tops are their bottom's value (no operation, no new value).
pub(crate) fn aliases_tops(layer_type: &str) -> bool {
    matches!(layer_type, "Dropout" | "Split")
}

/// Converts one layer; returns one value per top.
pub(crate) fn convert(net: &mut Net, layer: &Layer, inputs: &[Value]) -> Result<Vec<Value>> {
    let one = |v: Value| Ok(vec![v]);
    match layer.ty() {
        "Convolution" => one(convolution(net, layer, single(net, layer, inputs)?, false)?),
        "Deconvolution" => one(convolution(net, layer, single(net, layer, inputs)?, true)?),
        "Pooling" => one(pooling(net, layer, single(net, layer, inputs)?)?),
        "InnerProduct" => one(inner_product(net, layer, single(net, layer, inputs)?)?),
        "ReLU" => {
            let x = single(net, layer, inputs)?;
            let slope = layer.param.relu_param.unwrap_or_default().negative_slope();
            if slope == 0.0 {
                one(unary(net, layer, x, "Relu", vec![])?)
            } else {
                one(unary(net, layer, x, "LeakyRelu", vec![("alpha", Attribute::Float(slope))])?)
            }
        }
        "PReLU" => one(prelu(net, layer, single(net, layer, inputs)?)?),
        "ELU" => {
            let alpha = layer.param.elu_param.unwrap_or_default().alpha();
            one(unary(net, layer, single(net, layer, inputs)?, "Elu", vec![("alpha", Attribute::Float(alpha))])?)
        }
        "Sigmoid" => one(unary(net, layer, single(net, layer, inputs)?, "Sigmoid", vec![])?),
        "TanH" => one(unary(net, layer, single(net, layer, inputs)?, "Tanh", vec![])?),
        "AbsVal" => one(unary(net, layer, single(net, layer, inputs)?, "Abs", vec![])?),
        "BNLL" => one(unary(net, layer, single(net, layer, inputs)?, "Softplus", vec![])?),
        "Power" => one(power(net, layer, single(net, layer, inputs)?)?),
        "Clip" => one(clip(net, layer, single(net, layer, inputs)?)?),
        "BatchNorm" => one(batch_norm(net, layer, single(net, layer, inputs)?)?),
        "Scale" => one(scale(net, layer, inputs)?),
        "Eltwise" => one(eltwise(net, layer, inputs)?),
        "Concat" => one(concat(net, layer, inputs)?),
        "Slice" => slice(net, layer, single(net, layer, inputs)?),
        "Split" => Ok(vec![single(net, layer, inputs)?; layer.param.top.len()]),
        "Dropout" => one(single(net, layer, inputs)?),
        "Softmax" => one(softmax(net, layer, single(net, layer, inputs)?)?),
        "Flatten" => one(flatten(net, layer, single(net, layer, inputs)?)?),
        "Reshape" => one(reshape(net, layer, single(net, layer, inputs)?)?),
        "LRN" => one(lrn(net, layer, single(net, layer, inputs)?)?),
        "Silence" => Ok(vec![]),
        other => Err(CaffeError::UnsupportedLayer {
            file: net.file.to_string(),
            layer: layer.name().to_string(),
            layer_type: other.to_string(),
            supported: SUPPORTED_LAYERS.join(", "),
        }),
    }
}

/// The one bottom of a single-input layer.
fn single(net: &Net, layer: &Layer, inputs: &[Value]) -> Result<Value> {
    match inputs {
        [x] => Ok(x.clone()),
        _ => Err(net.layer_error(layer, format!("takes one bottom, has {}", inputs.len()))),
    }
}

fn ints(values: &[usize]) -> Attribute {
    Attribute::Ints(values.iter().map(|&v| v as i64).collect())
}

fn unary(net: &mut Net, layer: &Layer, x: Value, op_type: &str, attrs: Vec<(&str, Attribute)>) -> Result<Value> {
    net.op(layer, "", op_type, &[x.var], attrs, x.shape)
}

/// `[c]` followed by ones up to `rank` axes from `axis` on: a per-channel constant's shape.
fn broadcast_shape(dims: &[usize], axis: usize, rank: usize) -> Vec<usize> {
    let mut shape = dims.to_vec();
    shape.resize(rank.saturating_sub(axis).max(dims.len()), 1);
    shape
}

/// Kernel, stride, pad or dilation of a convolution: `n` values from the repeated field (one for
/// all axes, or one each), or from the `_h`/`_w` fields for 2-D.
fn spatial(
    net: &Net,
    layer: &Layer,
    what: &str,
    list: &[u32],
    hw: Option<(u32, u32)>,
    n: usize,
    default: Option<usize>,
) -> Result<Vec<usize>> {
    if let Some((h, w)) = hw {
        if n != 2 {
            return Err(net.layer_error(layer, format!("{what}_h/{what}_w are for 2-D inputs only")));
        }
        return Ok(vec![h as usize, w as usize]);
    }
    match (list, default) {
        ([], Some(d)) => Ok(vec![d; n]),
        ([], None) => Err(net.layer_error(layer, format!("{what} is not given"))),
        ([v], _) => Ok(vec![*v as usize; n]),
        (vs, _) if vs.len() == n => Ok(vs.iter().map(|&v| v as usize).collect()),
        (vs, _) => Err(net.layer_error(layer, format!("{} values of {what} for {n} spatial axes", vs.len()))),
    }
}

fn either(h: Option<u32>, w: Option<u32>, default: u32) -> Option<(u32, u32)> {
    (h.is_some() || w.is_some()).then(|| (h.unwrap_or(default), w.unwrap_or(default)))
}

fn positive(net: &Net, layer: &Layer, what: &str, values: &[usize]) -> Result<()> {
    if values.contains(&0) {
        return Err(net.layer_error(layer, format!("{what} {values:?} must be positive")));
    }
    Ok(())
}

/// Convolution (`Conv`) and Deconvolution (`ConvTranspose`): group, dilation, pads, bias.
fn convolution(net: &mut Net, layer: &Layer, x: Value, transposed: bool) -> Result<Value> {
    let p: ConvolutionParameter = layer.param.convolution_param.clone().unwrap_or_default();
    let rank = x.shape.len();
    if rank < 3 || shape::axis(i64::from(p.axis()), rank).map_err(|m| net.layer_error(layer, m))? != 1 {
        return Err(net.layer_error(layer, format!("needs an N x C x spatial input with axis 1, has {:?}", x.shape)));
    }
    let n = rank - 2;
    let kernel = spatial(net, layer, "kernel", &p.kernel_size, either(p.kernel_h, p.kernel_w, 0), n, None)?;
    let stride = spatial(net, layer, "stride", &p.stride, either(p.stride_h, p.stride_w, 1), n, Some(1))?;
    let pad = spatial(net, layer, "pad", &p.pad, either(p.pad_h, p.pad_w, 0), n, Some(0))?;
    let dilation = spatial(net, layer, "dilation", &p.dilation, None, n, Some(1))?;
    positive(net, layer, "kernel", &kernel)?;
    positive(net, layer, "stride", &stride)?;
    positive(net, layer, "dilation", &dilation)?;
    let (channels, outputs, group) = (x.shape[1], p.num_output() as usize, p.group() as usize);
    if outputs == 0 || group == 0 || !channels.is_multiple_of(group) || !outputs.is_multiple_of(group) {
        return Err(net.layer_error(
            layer,
            format!("num_output {outputs} and input channels {channels} must be positive multiples of group {group}"),
        ));
    }
    let mut weight_shape = if transposed { vec![channels, outputs / group] } else { vec![outputs, channels / group] };
    weight_shape.extend_from_slice(&kernel);
    let weight = net.blob(layer, 0, "weight", &weight_shape)?;
    let mut ins = vec![x.var];
    ins.push(weight);
    if p.bias_term() {
        ins.push(net.blob(layer, 1, "bias", &[outputs])?);
    }
    let mut out_shape = vec![x.shape[0], outputs];
    for i in 0..n {
        let size = if transposed {
            shape::deconv_out(x.shape[i + 2], kernel[i], stride[i], pad[i], dilation[i])
        } else {
            shape::conv_out(x.shape[i + 2], kernel[i], stride[i], pad[i], dilation[i])
        };
        out_shape.push(size.map_err(|m| net.layer_error(layer, m))?);
    }
    let pads: Vec<usize> = pad.iter().chain(&pad).copied().collect();
    let attrs = vec![
        ("kernel_shape", ints(&kernel)),
        ("strides", ints(&stride)),
        ("pads", ints(&pads)),
        ("dilations", ints(&dilation)),
        ("group", Attribute::Int(group as i64)),
    ];
    net.op(layer, "", if transposed { "ConvTranspose" } else { "Conv" }, &ins, attrs, out_shape)
}

/// Pooling (MAX, AVE; global or windowed) with Caffe's output size and AVE divisor.
fn pooling(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let p = layer.param.pooling_param.unwrap_or_default();
    if x.shape.len() != 4 {
        return Err(net.layer_error(layer, format!("needs a 4-D input, has {:?}", x.shape)));
    }
    let method = p.pool();
    let onnx = match method {
        PoolMethod::Max => "MaxPool",
        PoolMethod::Ave => "AveragePool",
        PoolMethod::Stochastic => {
            return Err(net.layer_error(layer, "STOCHASTIC pooling is not supported (only MAX and AVE)"));
        }
    };
    let (h, w) = (x.shape[2], x.shape[3]);
    if p.global_pooling() {
        let op = if method == PoolMethod::Max { "GlobalMaxPool" } else { "GlobalAveragePool" };
        let shape = vec![x.shape[0], x.shape[1], 1, 1];
        return net.op(layer, "", op, &[x.var], vec![], shape);
    }
    let kernel = match (p.kernel_size, p.kernel_h, p.kernel_w) {
        (_, Some(kh), Some(kw)) => [kh as usize, kw as usize],
        (Some(k), None, None) => [k as usize; 2],
        _ => return Err(net.layer_error(layer, "needs kernel_size, or kernel_h and kernel_w, or global_pooling")),
    };
    let pad = if p.pad_h.is_some() || p.pad_w.is_some() {
        [p.pad_h() as usize, p.pad_w() as usize]
    } else {
        [p.pad() as usize; 2]
    };
    let stride = match (p.stride_h, p.stride_w) {
        (None, None) => [p.stride() as usize; 2],
        (sh, sw) => [sh.unwrap_or(1) as usize, sw.unwrap_or(1) as usize],
    };
    positive(net, layer, "kernel", &kernel)?;
    positive(net, layer, "stride", &stride)?;
    let rounding = if p.round_mode() == RoundMode::Floor { Rounding::Floor } else { Rounding::Ceil };
    let mut out = [0; 2];
    let mut end_pad = [0; 2];
    for (i, size) in [h, w].into_iter().enumerate() {
        out[i] =
            shape::pool_out(size, kernel[i], stride[i], pad[i], rounding).map_err(|m| net.layer_error(layer, m))?;
        // End padding that makes ONNX's floor rounding give Caffe's count (never negative:
        // a smaller value rounds down to the same count).
        end_pad[i] = ((out[i] - 1) * stride[i] + kernel[i]).saturating_sub(size + pad[i]);
    }
    let out_shape = vec![x.shape[0], x.shape[1], out[0], out[1]];
    let mut attrs = vec![("kernel_shape", ints(&kernel)), ("strides", ints(&stride))];
    let mut input = x.var;
    if method == PoolMethod::Max {
        attrs.push(("pads", ints(&[pad[0], pad[1], end_pad[0], end_pad[1]])));
    } else {
        if pad != [0, 0] {
            let pads = [0, 0, pad[0], pad[1], 0, 0, pad[0], pad[1]].map(|v| v as i64);
            let pads = net.constant_i64(layer, "pads", &pads)?;
            let padded = vec![x.shape[0], x.shape[1], h + 2 * pad[0], w + 2 * pad[1]];
            input = net.op(layer, "pad", "Pad", &[x.var, pads], vec![], padded)?.var;
        }
        let extra = [end_pad[0].saturating_sub(pad[0]), end_pad[1].saturating_sub(pad[1])];
        attrs.push(("pads", ints(&[0, 0, extra[0], extra[1]])));
        attrs.push(("count_include_pad", Attribute::Int(0)));
    }
    net.op(layer, "", onnx, &[input], attrs, out_shape)
}

/// InnerProduct: `Flatten(axis)` → `Gemm` (weight `N x K`, or `K x N` with `transpose`), and a
/// `Reshape` back to `input[..axis] + [N]` unless `axis` is 1.
fn inner_product(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let p = layer.param.inner_product_param.clone().unwrap_or_default();
    let axis = shape::axis(i64::from(p.axis()), x.shape.len()).map_err(|m| net.layer_error(layer, m))?;
    let outer: usize = x.shape[..axis].iter().product();
    let k: usize = x.shape[axis..].iter().product();
    let n = p.num_output() as usize;
    if n == 0 {
        return Err(net.layer_error(layer, "num_output must be positive"));
    }
    let weight_shape = if p.transpose() { [k, n] } else { [n, k] };
    let weight = net.blob(layer, 0, "weight", &weight_shape)?;
    let mut flat = x.clone();
    if x.shape.len() != 2 || axis != 1 {
        flat =
            net.op(layer, "flatten", "Flatten", &[x.var], vec![("axis", Attribute::Int(axis as i64))], vec![outer, k])?;
    }
    let mut ins = vec![flat.var, weight];
    if p.bias_term() {
        ins.push(net.blob(layer, 1, "bias", &[n])?);
    }
    let attrs = vec![("transB", Attribute::Int(i64::from(!p.transpose())))];
    let role = if axis == 1 { "" } else { "gemm" };
    let y = net.op(layer, role, "Gemm", &ins, attrs, vec![outer, n])?;
    if axis == 1 {
        return Ok(y);
    }
    let mut shape: Vec<usize> = x.shape[..axis].to_vec();
    shape.push(n);
    let target = net.constant_i64(layer, "shape", &shape.iter().map(|&d| d as i64).collect::<Vec<_>>())?;
    net.op(layer, "", "Reshape", &[y.var, target], vec![], shape)
}

/// PReLU: one slope per channel (axis 1), or one for all with `channel_shared`.
fn prelu(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let shared = layer.param.prelu_param.clone().unwrap_or_default().channel_shared();
    let rank = x.shape.len();
    let slope_shape = if shared || rank < 2 { vec![1] } else { broadcast_shape(&[x.shape[1]], 1, rank) };
    let count = if shared || rank < 2 { 1 } else { x.shape[1] };
    let values = net.blob_values(layer, 0, "slope", &[count])?;
    let slope = net.constant(layer, "slope", slope_shape, &values)?;
    net.op(layer, "", "PRelu", &[x.var, slope], vec![], x.shape)
}

/// Power: `(shift + scale * x) ^ power` as the Mul, Add and Pow that are not identities.
fn power(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let p = layer.param.power_param.unwrap_or_default();
    let mut y = x;
    let steps = [("scale", "Mul", p.scale(), 1.0), ("shift", "Add", p.shift(), 0.0), ("power", "Pow", p.power(), 1.0)];
    let last = steps.iter().rposition(|s| s.2 != s.3);
    for (i, (what, op_type, value, identity)) in steps.into_iter().enumerate() {
        if value != identity {
            let c = net.constant(layer, what, vec![], &[value])?;
            let role = if Some(i) == last { "" } else { what };
            y = net.op(layer, role, op_type, &[y.var, c], vec![], y.shape.clone())?;
        }
    }
    if last.is_none() {
        y = unary(net, layer, y, "Identity", vec![])?;
    }
    Ok(y)
}

fn clip(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let p = layer.param.clip_param.unwrap_or_default();
    let min = net.constant(layer, "min", vec![], &[p.min])?;
    let max = net.constant(layer, "max", vec![], &[p.max])?;
    net.op(layer, "", "Clip", &[x.var, min, max], vec![], x.shape)
}

/// BatchNorm with global statistics: mean and variance divided by the moving-average factor of
/// blob 2 (0 stands for no accumulation, as in Caffe), unit scale and zero bias.
fn batch_norm(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let p = layer.param.batch_norm_param.unwrap_or_default();
    if p.use_global_stats == Some(false) {
        return Err(net.layer_error(
            layer,
            "use_global_stats is false: Caffe would normalise with the batch's own statistics (training mode)",
        ));
    }
    if x.shape.len() < 2 {
        return Err(net.layer_error(layer, format!("needs an N x C (x ...) input, has {:?}", x.shape)));
    }
    let c = x.shape[1];
    let factor = net.blob_values(layer, 2, "moving-average factor", &[1])?[0];
    let factor = if factor == 0.0 { 0.0 } else { 1.0 / factor };
    let mean: Vec<f32> = net.blob_values(layer, 0, "mean", &[c])?.iter().map(|v| v * factor).collect();
    let var: Vec<f32> = net.blob_values(layer, 1, "variance", &[c])?.iter().map(|v| v * factor).collect();
    let ins = [
        x.var,
        net.constant(layer, "scale", vec![c], &vec![1.0; c])?,
        net.constant(layer, "bias", vec![c], &vec![0.0; c])?,
        net.constant(layer, "mean", vec![c], &mean)?,
        net.constant(layer, "var", vec![c], &var)?,
    ];
    let attrs = vec![("epsilon", Attribute::Float(p.eps()))];
    net.op(layer, "", "BatchNormalization", &ins, attrs, x.shape)
}

/// Scale: `x * s (+ b)`, `s` a learned blob covering axes `axis .. axis + num_axes` or the second
/// bottom; both broadcast over the trailing axes.
fn scale(net: &mut Net, layer: &Layer, inputs: &[Value]) -> Result<Value> {
    let p = layer.param.scale_param.clone().unwrap_or_default();
    let Some(x) = inputs.first().cloned() else {
        return Err(net.layer_error(layer, "takes one or two bottoms, has none"));
    };
    let rank = x.shape.len();
    let axis = shape::axis(i64::from(p.axis()), rank.max(1)).map_err(|m| net.layer_error(layer, m))?;
    let (factor, dims, bias_blob) = match inputs {
        [_] => {
            let end = if p.num_axes() == -1 { rank } else { axis + p.num_axes().max(0) as usize };
            let dims = x.shape.get(axis..end).ok_or_else(|| net.layer_error(layer, "num_axes exceeds the rank"))?;
            let dims = dims.to_vec();
            let values = net.blob_values(layer, 0, "scale", &dims)?;
            (net.constant(layer, "scale", broadcast_shape(&dims, axis, rank), &values)?, dims, 1)
        }
        [_, s] => {
            if x.shape.get(axis..axis + s.shape.len()) != Some(&s.shape[..]) {
                return Err(net.layer_error(
                    layer,
                    format!("the scale bottom {:?} does not match input {:?} from axis {axis}", s.shape, x.shape),
                ));
            }
            let target = broadcast_shape(&s.shape, axis, rank);
            let factor = if target == s.shape {
                s.var
            } else {
                let t: Vec<i64> = target.iter().map(|&d| d as i64).collect();
                let t = net.constant_i64(layer, "scale_shape", &t)?;
                net.op(layer, "scale_reshape", "Reshape", &[s.var, t], vec![], target)?.var
            };
            (factor, s.shape.clone(), 0)
        }
        _ => return Err(net.layer_error(layer, format!("takes one or two bottoms, has {}", inputs.len()))),
    };
    let role = if p.bias_term() { "mul" } else { "" };
    let y = net.op(layer, role, "Mul", &[x.var, factor], vec![], x.shape.clone())?;
    if !p.bias_term() {
        return Ok(y);
    }
    let values = net.blob_values(layer, bias_blob, "bias", &dims)?;
    let bias = net.constant(layer, "bias", broadcast_shape(&dims, axis, rank), &values)?;
    net.op(layer, "", "Add", &[y.var, bias], vec![], x.shape)
}

/// Eltwise: SUM (with coefficients) as Mul and Add, PROD as Mul, MAX as Max.
fn eltwise(net: &mut Net, layer: &Layer, inputs: &[Value]) -> Result<Value> {
    let p = layer.param.eltwise_param.clone().unwrap_or_default();
    let Some(first) = inputs.first() else { return Err(net.layer_error(layer, "has no bottom")) };
    if inputs.len() < 2 || inputs.iter().any(|v| v.shape != first.shape) {
        let shapes: Vec<_> = inputs.iter().map(|v| &v.shape).collect();
        return Err(net.layer_error(layer, format!("needs two or more bottoms of one shape, has {shapes:?}")));
    }
    let op = p.operation();
    if !p.coeff.is_empty() && (op != EltwiseOp::Sum || p.coeff.len() != inputs.len()) {
        return Err(net.layer_error(layer, "coeff is for SUM only, one per bottom"));
    }
    let shape = first.shape.clone();
    if op == EltwiseOp::Max {
        let vars: Vec<_> = inputs.iter().map(|v| v.var).collect();
        return net.op(layer, "", "Max", &vars, vec![], shape);
    }
    let mut terms = Vec::with_capacity(inputs.len());
    for (i, v) in inputs.iter().enumerate() {
        let c = p.coeff.get(i).copied().unwrap_or(1.0);
        if c == 1.0 {
            terms.push(v.var);
        } else {
            let coeff = net.constant(layer, &format!("coeff{i}"), vec![], &[c])?;
            terms.push(net.op(layer, &format!("coeff{i}"), "Mul", &[v.var, coeff], vec![], shape.clone())?.var);
        }
    }
    let op_type = if op == EltwiseOp::Prod { "Mul" } else { "Add" };
    let mut acc = terms[0];
    for (i, &t) in terms.iter().enumerate().skip(1) {
        let role = if i + 1 == terms.len() { String::new() } else { format!("{}{i}", op_type.to_lowercase()) };
        acc = net.op(layer, &role, op_type, &[acc, t], vec![], shape.clone())?.var;
    }
    Ok(Value { var: acc, shape })
}

fn concat(net: &mut Net, layer: &Layer, inputs: &[Value]) -> Result<Value> {
    let p = layer.param.concat_param.unwrap_or_default();
    let Some(first) = inputs.first() else { return Err(net.layer_error(layer, "has no bottom")) };
    let axis = p.concat_dim.map_or(i64::from(p.axis()), i64::from);
    let axis = shape::axis(axis, first.shape.len()).map_err(|m| net.layer_error(layer, m))?;
    let mut shape = first.shape.clone();
    shape[axis] = 0;
    for v in inputs {
        let same_rank = v.shape.len() == shape.len();
        if !same_rank || v.shape.iter().enumerate().any(|(i, &d)| i != axis && d != first.shape[i]) {
            return Err(
                net.layer_error(layer, format!("bottoms {:?} and {:?} differ off axis {axis}", first.shape, v.shape))
            );
        }
        shape[axis] += v.shape[axis];
    }
    let vars: Vec<_> = inputs.iter().map(|v| v.var).collect();
    net.op(layer, "", "Concat", &vars, vec![("axis", Attribute::Int(axis as i64))], shape)
}

/// Slice: `Split` at the slice points, or into equal parts, one per top.
fn slice(net: &mut Net, layer: &Layer, x: Value) -> Result<Vec<Value>> {
    let p = layer.param.slice_param.clone().unwrap_or_default();
    let axis = p.slice_dim.map_or(i64::from(p.axis()), i64::from);
    let axis = shape::axis(axis, x.shape.len()).map_err(|m| net.layer_error(layer, m))?;
    let (dim, tops) = (x.shape[axis], layer.param.top.len());
    let sizes: Vec<usize> = if p.slice_point.is_empty() {
        if tops == 0 || !dim.is_multiple_of(tops) {
            return Err(
                net.layer_error(layer, format!("axis {axis} of size {dim} does not split into {tops} equal parts"))
            );
        }
        vec![dim / tops; tops]
    } else {
        let mut bounds = vec![0];
        bounds.extend(p.slice_point.iter().map(|&s| s as usize));
        bounds.push(dim);
        if p.slice_point.len() + 1 != tops || bounds.windows(2).any(|w| w[0] >= w[1]) {
            return Err(net.layer_error(
                layer,
                format!("slice points {:?} must rise inside 1..{dim} and make {tops} parts", p.slice_point),
            ));
        }
        bounds.windows(2).map(|w| w[1] - w[0]).collect()
    };
    let split = net.constant_i64(layer, "split", &sizes.iter().map(|&s| s as i64).collect::<Vec<_>>())?;
    let shapes = sizes
        .iter()
        .map(|&s| {
            let mut shape = x.shape.clone();
            shape[axis] = s;
            shape
        })
        .collect();
    net.op_multi(layer, "", "Split", &[x.var, split], vec![("axis", Attribute::Int(axis as i64))], shapes)
}

fn softmax(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let p = layer.param.softmax_param.unwrap_or_default();
    let axis = shape::axis(i64::from(p.axis()), x.shape.len()).map_err(|m| net.layer_error(layer, m))?;
    unary(net, layer, x, "Softmax", vec![("axis", Attribute::Int(axis as i64))])
}

/// Flatten: ONNX `Flatten` when it gives Caffe's shape (axis 1 to the end), else a `Reshape`.
fn flatten(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let p = layer.param.flatten_param.unwrap_or_default();
    let shape = shape::flatten(&x.shape, i64::from(p.axis()), i64::from(p.end_axis()))
        .map_err(|m| net.layer_error(layer, m))?;
    if shape.len() == 2 && shape[0] == x.shape[0] && x.shape.len() >= 2 {
        return net.op(layer, "", "Flatten", &[x.var], vec![("axis", Attribute::Int(1))], shape);
    }
    reshape_to(net, layer, x, shape)
}

fn reshape(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let p = layer.param.reshape_param.clone().unwrap_or_default();
    let dims = p.shape.as_ref().map(|s| s.dim.clone()).unwrap_or_default();
    let shape = shape::reshape(&x.shape, &dims, i64::from(p.axis()), i64::from(p.num_axes()))
        .map_err(|m| net.layer_error(layer, m))?;
    reshape_to(net, layer, x, shape)
}

/// A `Reshape` to the static `shape` Caffe's rules computed.
fn reshape_to(net: &mut Net, layer: &Layer, x: Value, shape: Vec<usize>) -> Result<Value> {
    let target: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let target = net.constant_i64(layer, "shape", &target)?;
    net.op(layer, "", "Reshape", &[x.var, target], vec![], shape)
}

/// LRN across channels: the same formula as ONNX's (`k + alpha / n * sum`).
fn lrn(net: &mut Net, layer: &Layer, x: Value) -> Result<Value> {
    let p = layer.param.lrn_param.unwrap_or_default();
    if p.norm_region() != NormRegion::AcrossChannels {
        return Err(net.layer_error(layer, "WITHIN_CHANNEL normalisation is not supported (only ACROSS_CHANNELS)"));
    }
    if x.shape.len() != 4 || p.local_size().is_multiple_of(2) {
        return Err(net.layer_error(layer, "needs a 4-D input and an odd local_size"));
    }
    let attrs = vec![
        ("size", Attribute::Int(i64::from(p.local_size()))),
        ("alpha", Attribute::Float(p.alpha())),
        ("beta", Attribute::Float(p.beta())),
        ("bias", Attribute::Float(p.k())),
    ];
    unary(net, layer, x, "LRN", attrs)
}
