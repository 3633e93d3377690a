//! Helpers of the layer operators (nn, matrix products, Softmax, Resize, GridSample, quantized
//! convolutions): float-input checks, spatial attributes (kernel, strides, dilations, pads,
//! auto_pad) and small float-tensor shorthands over Burn's dispatch ops.

use crate::error::{ExecError, Result};
use crate::kernel::{KernelContext, OpNode};
use crate::tensor::{Kind, Tensor};
use burn::backend::ops::FloatTensorOps;
use burn::backend::{Dispatch, DispatchTensor};
use burn::tensor::Shape;

pub type D = DispatchTensor;

/// The opset a node is read under; 0 ("unknown", for which the registry picks the newest
/// implementation) reads as the newest version too.
pub fn opset(node: &OpNode<'_>) -> i64 {
    if node.opset <= 0 { i64::MAX } else { node.opset }
}

/// Takes a float tensor or reports the dtype.
pub fn float_tensor(ctx: &KernelContext<'_>, t: Tensor, what: &str) -> Result<Tensor> {
    if t.kind() != Kind::Float {
        return Err(ctx.err(format!("{what} must be a float tensor, got {}", t.dtype())));
    }
    Ok(t)
}

pub fn shape_err(
    ctx: &KernelContext<'_>,
    left: Vec<usize>,
    right: Vec<usize>,
    message: impl Into<String>,
) -> ExecError {
    ExecError::Shape {
        node: ctx.node.to_string(),
        op_type: ctx.op_type.to_string(),
        left,
        right,
        message: message.into(),
    }
}

/// Checks an output shape computed from attributes or data against the tensor budget
/// ([`crate::budget`]).
pub fn check_output_size(ctx: &KernelContext<'_>, shape: &[usize]) -> Result<()> {
    crate::budget::check(shape, 4).map(|_| ()).map_err(|m| shape_err(ctx, shape.to_vec(), vec![], m))
}

pub fn reshape(x: D, shape: &[usize]) -> D {
    Dispatch::float_reshape(x, Shape::from(shape.to_vec()))
}

pub fn scalar_like(x: &D, v: f64) -> D {
    use burn::backend::TensorMetadata;
    let shape = Shape::from(vec![1; x.shape().num_dims()]);
    Dispatch::float_full(shape, v.into(), &x.device(), x.dtype().into())
}

/// Mean over `axes` (kept as size 1).
pub fn mean_dims(x: D, axes: &[usize]) -> D {
    axes.iter().fold(x, |x, &a| Dispatch::float_mean_dim(x, a))
}

/// Population mean and variance over `axes` (kept as size 1).
pub fn moments(x: D, axes: &[usize]) -> (D, D) {
    let mean = mean_dims(x.clone(), axes);
    let d = Dispatch::float_sub(x, mean.clone());
    let var = mean_dims(Dispatch::float_mul(d.clone(), d), axes);
    (mean, var)
}

/// How ONNX derives the pads of a windowed operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// Spatial attributes of Conv / ConvTranspose / pooling, parsed at build time.
#[derive(Clone, Debug)]
pub struct Window {
    pub kernel: Option<Vec<usize>>,
    pub strides: Option<Vec<usize>>,
    pub dilations: Option<Vec<usize>>,
    pub pads: Option<Vec<usize>>,
    pub auto_pad: AutoPad,
}

fn positive(node: &OpNode<'_>, name: &str) -> Result<Option<Vec<usize>>> {
    match node.ints(name)? {
        None => Ok(None),
        Some(v) => {
            if v.iter().any(|&x| x < 1) {
                return Err(node.err(format!("attribute {name} must be positive, got {v:?}")));
            }
            Ok(Some(v.into_iter().map(|x| x as usize).collect()))
        }
    }
}

impl Window {
    pub fn parse(node: &OpNode<'_>) -> Result<Self> {
        let auto_pad = match node.string("auto_pad", "NOTSET")?.as_str() {
            "NOTSET" | "" => AutoPad::NotSet,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            "VALID" => AutoPad::Valid,
            other => return Err(node.err(format!("unknown auto_pad {other}"))),
        };
        let pads = match node.ints("pads")? {
            None => None,
            Some(p) => {
                if p.iter().any(|&x| x < 0) {
                    return Err(node.err(format!("negative pads {p:?} are not supported")));
                }
                Some(p.into_iter().map(|x| x as usize).collect())
            }
        };
        Ok(Self {
            kernel: positive(node, "kernel_shape")?,
            strides: positive(node, "strides")?,
            dilations: positive(node, "dilations")?,
            pads,
            auto_pad,
        })
    }

    fn list(
        ctx: &KernelContext<'_>,
        v: &Option<Vec<usize>>,
        n: usize,
        default: usize,
        name: &str,
    ) -> Result<Vec<usize>> {
        match v {
            None => Ok(vec![default; n]),
            Some(v) if v.len() == n => Ok(v.clone()),
            Some(v) => Err(ctx.err(format!("{name} has {} entries, expected {n}", v.len()))),
        }
    }

    /// Resolves kernel, strides, dilations and (begin, end) pads for `input` spatial dims.
    pub fn resolve(&self, ctx: &KernelContext<'_>, input: &[usize], kernel: Option<&[usize]>) -> Result<Resolved> {
        let n = input.len();
        let kernel = match (&self.kernel, kernel) {
            (Some(k), _) => Self::list(ctx, &Some(k.clone()), n, 1, "kernel_shape")?,
            (None, Some(k)) => k.to_vec(),
            (None, None) => return Err(ctx.err("kernel_shape is required")),
        };
        if kernel.len() != n || kernel.contains(&0) {
            return Err(ctx.err(format!("kernel_shape {kernel:?} must have {n} positive entries")));
        }
        let strides = Self::list(ctx, &self.strides, n, 1, "strides")?;
        let dilations = Self::list(ctx, &self.dilations, n, 1, "dilations")?;
        let mut pads = vec![(0usize, 0usize); n];
        match self.auto_pad {
            AutoPad::NotSet => {
                if let Some(p) = &self.pads {
                    if p.len() != 2 * n {
                        return Err(ctx.err(format!("pads has {} entries, expected {}", p.len(), 2 * n)));
                    }
                    for i in 0..n {
                        pads[i] = (p[i], p[i + n]);
                    }
                }
            }
            AutoPad::Valid => {}
            AutoPad::SameUpper | AutoPad::SameLower => {
                for i in 0..n {
                    let out = input[i].div_ceil(strides[i]);
                    let span = (kernel[i] - 1) * dilations[i] + 1;
                    let total = ((out.max(1) - 1) * strides[i] + span).saturating_sub(input[i]);
                    let small = total / 2;
                    pads[i] = if self.auto_pad == AutoPad::SameUpper {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    };
                }
            }
        }
        Ok(Resolved { kernel, strides, dilations, pads })
    }
}

#[derive(Clone, Debug)]
pub struct Resolved {
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads: Vec<(usize, usize)>,
}

impl Resolved {
    /// Output spatial sizes (floor or ceil division), or an error if a window does not fit.
    pub fn output(&self, ctx: &KernelContext<'_>, input: &[usize], ceil: bool) -> Result<Vec<usize>> {
        let mut out = Vec::with_capacity(input.len());
        for i in 0..input.len() {
            let padded = input[i] + self.pads[i].0 + self.pads[i].1;
            let span = (self.kernel[i] - 1) * self.dilations[i] + 1;
            if padded < span {
                return Err(shape_err(
                    ctx,
                    input.to_vec(),
                    self.kernel.clone(),
                    "input (padded) is smaller than the window",
                ));
            }
            let num = padded - span;
            let mut o = if ceil { num.div_ceil(self.strides[i]) + 1 } else { num / self.strides[i] + 1 };
            // The last window must start inside the input or the begin padding.
            if ceil && o > 1 && (o - 1) * self.strides[i] >= input[i] + self.pads[i].0 {
                o -= 1;
            }
            out.push(o);
        }
        Ok(out)
    }
}
