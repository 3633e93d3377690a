//! AffineGrid (opset 20): the sampling grid of GridSample for a batch of 2-d (N×2×3) or 3-d
//! (N×3×4) affine matrices; the normalised base grid is built on the host, the transform is a
//! batched matmul.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{check_output_size, float_tensor, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("AffineGrid", 20, build);
}

struct AffineGrid {
    align_corners: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(AffineGrid { align_corners: node.int("align_corners", 0)? != 0 }))
}

impl Kernel for AffineGrid {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let theta = float_tensor(ctx, ins.tensor(0)?, "theta")?;
        let size = ins.tensor(1)?.to_i64_vec();
        let ts = theta.shape();
        let nd = size.len().saturating_sub(2);
        if !(nd == 2 || nd == 3) || size.iter().any(|&s| s < 1) || ts != [size[0] as usize, nd, nd + 1] {
            return Err(shape_err(
                ctx,
                ts,
                size.iter().map(|&s| s.max(0) as usize).collect(),
                "theta must be [N,2,3] with size [N,C,H,W] or [N,3,4] with [N,C,D,H,W]",
            ));
        }
        let n = ts[0];
        let spatial: Vec<usize> = size[2..].iter().map(|&s| s as usize).collect();
        let mut out_shape = vec![n];
        out_shape.extend(&spatial);
        out_shape.push(nd);
        check_output_size(ctx, &out_shape)?;
        let coord = |i: usize, len: usize| -> f32 {
            if self.align_corners {
                if len == 1 { -1.0 } else { -1.0 + 2.0 * i as f32 / (len - 1) as f32 }
            } else {
                -1.0 + (2 * i + 1) as f32 / len as f32
            }
        };
        let points: usize = spatial.iter().product();
        let mut base = Vec::with_capacity(points * (nd + 1));
        for p in 0..points {
            // Spatial index of point p (row-major over D, H, W); coordinates listed x, y, z.
            let mut rem = p;
            let mut idx = vec![0; nd];
            for a in (0..nd).rev() {
                idx[a] = rem % spatial[a];
                rem /= spatial[a];
            }
            for a in (0..nd).rev() {
                base.push(coord(idx[a], spatial[a]));
            }
            base.push(1.0);
        }
        let base = Tensor::from_f32(&[1, points, nd + 1], base, ctx.device).cast(theta.dtype())?;
        let base = base.expand(&[n, points, nd + 1]).into_dispatch();
        let grid = Dispatch::float_matmul(base, Dispatch::float_transpose(theta.into_dispatch()));
        Ok(vec![Some(Tensor::from_dispatch(grid).reshape(&out_shape).into())])
    }
}
