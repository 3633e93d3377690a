//! Col2Im (opset 18): folds sliding blocks [N, C*prod(block), L] back into an image
//! [N, C, image..] (any number of spatial axes; strides, dilations, pads), summing overlaps:
//! block-to-pixel indices are computed on the host, the sum is one scatter-add on Burn.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{check_output_size, float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, TensorMetadata};
use burn::tensor::ops::IndexingUpdateOp;
use burn::tensor::{Shape, Slice};

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Col2Im", 18, build);
}

struct Col2Im {
    dilations: Option<Vec<i64>>,
    pads: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Col2Im {
        dilations: node.ints("dilations")?,
        pads: node.ints("pads")?,
        strides: node.ints("strides")?,
    }))
}

impl Kernel for Col2Im {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "input")?;
        let image = ins.tensor(1)?.to_i64_vec();
        let block = ins.tensor(2)?.to_i64_vec();
        let n = image.len();
        let list = |v: &Option<Vec<i64>>, len: usize, default: i64, min: i64, name: &str| -> Result<Vec<usize>> {
            let v = v.clone().unwrap_or_else(|| vec![default; len]);
            if v.len() != len || v.iter().any(|&a| a < min) {
                return Err(ctx.err(format!("{name} {v:?} must have {len} values >= {min}")));
            }
            Ok(v.into_iter().map(|a| a as usize).collect())
        };
        if n == 0 || block.len() != n || image.iter().chain(&block).any(|&a| a < 1) {
            return Err(
                ctx.err(format!("image_shape {image:?} and block_shape {block:?} must be positive and of one length"))
            );
        }
        let image: Vec<usize> = image.into_iter().map(|a| a as usize).collect();
        let block: Vec<usize> = block.into_iter().map(|a| a as usize).collect();
        let dil = list(&self.dilations, n, 1, 1, "dilations")?;
        let strides = list(&self.strides, n, 1, 1, "strides")?;
        let pads = list(&self.pads, 2 * n, 0, 0, "pads")?;
        let padded: Vec<usize> = (0..n).map(|i| image[i] + pads[i] + pads[i + n]).collect();
        let mut blocks = Vec::with_capacity(n);
        for i in 0..n {
            let span = dil[i] * (block[i] - 1) + 1;
            if padded[i] < span {
                return Err(shape_err(ctx, image.clone(), block.clone(), "block does not fit the padded image"));
            }
            blocks.push((padded[i] - span) / strides[i] + 1);
        }
        let xs = x.shape();
        let kprod: usize = block.iter().product();
        let lprod: usize = blocks.iter().product();
        if xs.len() != 3 || xs[1] % kprod != 0 || xs[2] != lprod {
            return Err(shape_err(
                ctx,
                xs,
                vec![kprod, lprod],
                "input must be [N, C*prod(block_shape), L] with L the block count",
            ));
        }
        let (batch, c) = (xs[0], xs[1] / kprod);
        let mut out_shape = vec![batch, c];
        out_shape.extend(&image);
        check_output_size(ctx, &out_shape)?;
        let pprod: usize = padded.iter().product();
        let unravel = |mut f: usize, dims: &[usize]| -> Vec<usize> {
            let mut v = vec![0; dims.len()];
            for i in (0..dims.len()).rev() {
                v[i] = f % dims[i];
                f /= dims[i];
            }
            v
        };
        let mut idx = Vec::with_capacity(kprod * lprod);
        for k in 0..kprod {
            let kk = unravel(k, &block);
            for l in 0..lprod {
                let ll = unravel(l, &blocks);
                let flat = (0..n).fold(0usize, |acc, i| acc * padded[i] + ll[i] * strides[i] + kk[i] * dil[i]);
                idx.push(flat as i64);
            }
        }
        let xd = reshape(x.into_dispatch(), &[batch, c, kprod * lprod]);
        let idx = Tensor::from_i64(&[1, 1, kprod * lprod], idx, ctx.device).into_dispatch();
        let idx = Dispatch::int_expand(idx, Shape::from(vec![batch, c, kprod * lprod]));
        let zeros = Dispatch::float_zeros(Shape::from(vec![batch, c, pprod]), &xd.device(), xd.dtype().into());
        let y = Dispatch::float_scatter(2, zeros, idx, xd, IndexingUpdateOp::Add);
        let mut full = vec![batch, c];
        full.extend(&padded);
        let y = Tensor::from_dispatch(reshape(y, &full));
        let mut slices = vec![Slice::new(0, None, 1), Slice::new(0, None, 1)];
        slices.extend((0..n).map(|i| Slice::new(pads[i] as isize, Some((pads[i] + image[i]) as isize), 1)));
        Ok(vec![Some(y.slice(&slices).into())])
    }
}
