//! DepthToSpace (DCR/CRD) and SpaceToDepth: block rearrangements between channels and space,
//! each one reshape, one permute and one reshape.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::one;
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("DepthToSpace", 1, build);
    r.register_fn("SpaceToDepth", 1, build);
}

#[derive(Clone, Copy)]
enum Dir {
    SpaceDcr,
    SpaceCrd,
    Depth,
}

struct Block {
    dir: Dir,
    b: usize,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let b = node.int("blocksize", 0)?;
    let b = usize::try_from(b)
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| node.err(format!("blocksize {b} must be positive")))?;
    let dir = if node.op.op_type == "SpaceToDepth" {
        Dir::Depth
    } else {
        match node.string("mode", "DCR")?.as_str() {
            "DCR" => Dir::SpaceDcr,
            "CRD" => Dir::SpaceCrd,
            other => return Err(node.err(format!("unknown mode `{other}`"))),
        }
    };
    Ok(Box::new(Block { dir, b }))
}

impl Kernel for Block {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        let s = x.shape();
        let [n, c, h, w] = s[..] else {
            return Err(ctx.err(format!("input must have rank 4, not {}", s.len())));
        };
        let b = self.b;
        let (view, perm, out): (Vec<usize>, [usize; 6], Vec<usize>) = match self.dir {
            Dir::SpaceDcr | Dir::SpaceCrd => {
                if c % (b * b) != 0 {
                    return Err(ctx.err(format!("{c} channels are not divisible by blocksize² {}", b * b)));
                }
                let c2 = c / (b * b);
                let out = vec![n, c2, h * b, w * b];
                match self.dir {
                    Dir::SpaceDcr => (vec![n, b, b, c2, h, w], [0, 3, 4, 1, 5, 2], out),
                    _ => (vec![n, c2, b, b, h, w], [0, 1, 4, 2, 5, 3], out),
                }
            }
            Dir::Depth => {
                if h % b != 0 || w % b != 0 {
                    return Err(ctx.err(format!("spatial size {h}x{w} is not divisible by blocksize {b}")));
                }
                (vec![n, c, h / b, b, w / b, b], [0, 3, 5, 1, 2, 4], vec![n, c * b * b, h / b, w / b])
            }
        };
        if x.numel() == 0 {
            return one(x.reshape(&out));
        }
        one(x.reshape(&view).permute(&perm).reshape(&out))
    }
}
