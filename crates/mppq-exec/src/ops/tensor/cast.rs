//! Cast (`to` attribute; an ONNX type name string before opset 6) and CastLike (type of the
//! second input), between every float, integer and bool type Burn holds and the low-precision
//! ones held by stand-in (FP8, FP4, E8M0, 4/2-bit ints; `saturate` from opset 19, E8M0
//! `round_mode` from opset 24). String and complex targets are reported as unsupported when the
//! node is built.

use crate::error::{ExecError, Result};
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::tensor::{CastOptions, burn_dtype, is_low_precision};
use crate::value::Value;
use mppq_ir::lowp::E8M0Rounding;
use mppq_ir::{Attribute, DataType};

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Cast", 1, build_cast);
    r.register_fn("CastLike", 15, build_cast_like);
}

struct Cast {
    /// `None`: the type of input 1 (CastLike).
    to: Option<DataType>,
    options: CastOptions,
}

fn unsupported(node: &OpNode<'_>, to: DataType) -> ExecError {
    ExecError::Unsupported {
        op_type: node.op.op_type.clone(),
        domain: "ai.onnx".into(),
        opset: node.opset,
        node: node.label().to_string(),
        hint: format!(" (target type {} is not held by the tensor backend)", to.onnx_name()),
    }
}

fn build_cast(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let to = match node.op.attr("to") {
        Some(Attribute::Int(code)) => {
            let code = i32::try_from(*code).map_err(|_| node.err(format!("unknown type code {code}")))?;
            DataType::from_onnx_code(code).ok_or_else(|| node.err(format!("unknown type code {code}")))?
        }
        Some(Attribute::String(name)) => {
            let name = String::from_utf8_lossy(name).to_ascii_uppercase();
            DataType::ALL
                .iter()
                .copied()
                .find(|d| d.onnx_name() == name)
                .ok_or_else(|| node.err(format!("unknown type name `{name}`")))?
        }
        Some(_) => return Err(node.err("attribute `to` must be an int (or a type name before opset 6)")),
        None => return Err(node.err("attribute `to` is required")),
    };
    if burn_dtype(to).is_none() && !is_low_precision(to) {
        return Err(unsupported(node, to));
    }
    Ok(Box::new(Cast { to: Some(to), options: options(node)? }))
}

fn build_cast_like(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Cast { to: None, options: options(node)? }))
}

/// `saturate` (opset 19+, default 1) and `round_mode` (opset 24+, default `up`).
fn options(node: &OpNode<'_>) -> Result<CastOptions> {
    let saturate = node.opset < 19 || node.int("saturate", 1)? != 0;
    let e8m0 = if node.opset >= 24 {
        let mode = node.string("round_mode", "up")?;
        E8M0Rounding::from_name(&mode)
            .ok_or_else(|| node.err(format!("unknown round_mode `{mode}` (up, down or nearest)")))?
    } else {
        E8M0Rounding::Up
    };
    Ok(CastOptions { saturate, e8m0 })
}

impl Kernel for Cast {
    /// Casts decode and round low-precision types (`Tensor::cast_with`).
    fn handles_low_precision(&self) -> bool {
        true
    }

    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let to = match self.to {
            Some(t) => t,
            None => ins.tensor(1)?.dtype(),
        };
        let y = x.cast_with(to, self.options).map_err(|e| ctx.err(e.to_string()))?;
        Ok(vec![Some(y.into())])
    }
}
