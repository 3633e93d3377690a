//! NonMaxSuppression: greedy per-(batch, class) box selection by score and IoU
//! (center_point_box 0: [y1, x1, y2, x2] corners in any order; 1: [xc, yc, w, h]).
//! Runs on the host: box lists are small and the algorithm is sequential.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("NonMaxSuppression", 10, build);
}

struct Nms {
    center_point_box: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let c = node.int("center_point_box", 0)?;
    if c != 0 && c != 1 {
        return Err(node.err(format!("center_point_box must be 0 or 1, not {c}")));
    }
    Ok(Box::new(Nms { center_point_box: c == 1 }))
}

/// (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2.
fn corners(b: &[f32], center: bool) -> [f32; 4] {
    if center {
        let (xc, yc, w, h) = (b[0], b[1], b[2], b[3]);
        [yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]
    } else {
        [b[0].min(b[2]), b[1].min(b[3]), b[0].max(b[2]), b[1].max(b[3])]
    }
}

fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let ih = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let iw = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = ih * iw;
    let area_a = (a[2] - a[0]) * (a[3] - a[1]);
    let area_b = (b[2] - b[0]) * (b[3] - b[1]);
    let union = area_a + area_b - inter;
    if inter <= 0.0 || union <= 0.0 { 0.0 } else { inter / union }
}

impl Kernel for Nms {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (boxes, scores) = (ins.tensor(0)?, ins.tensor(1)?);
        let max_out = ins.ints(2)?.and_then(|v| v.first().copied()).unwrap_or(0);
        let iou_t = ins.opt_tensor(3)?.map(|t| t.to_f32_vec().first().copied().unwrap_or(0.0)).unwrap_or(0.0);
        let score_t = ins.opt_tensor(4)?.map(|t| t.to_f32_vec().first().copied());
        let score_t = score_t.flatten();
        let (bs, ss) = (boxes.shape(), scores.shape());
        if boxes.kind() != Kind::Float || scores.kind() != Kind::Float {
            return Err(ctx.err("boxes and scores must be float tensors"));
        }
        if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
            return Err(crate::error::ExecError::Shape {
                node: ctx.node.to_string(),
                op_type: ctx.op_type.to_string(),
                left: bs,
                right: ss,
                message: "must be boxes [B, N, 4] and scores [B, C, N]".into(),
            });
        }
        let (nb, n, nc) = (bs[0], bs[1], ss[1]);
        let bv = boxes.to_f32_vec();
        let sv = scores.to_f32_vec();
        let mut selected: Vec<i64> = Vec::new();
        if max_out > 0 {
            for b in 0..nb {
                let cs: Vec<[f32; 4]> =
                    (0..n).map(|i| corners(&bv[(b * n + i) * 4..(b * n + i) * 4 + 4], self.center_point_box)).collect();
                for c in 0..nc {
                    let sc = &sv[(b * nc + c) * n..(b * nc + c + 1) * n];
                    let mut order: Vec<usize> = (0..n).filter(|&i| score_t.is_none_or(|t| sc[i] > t)).collect();
                    order.sort_by(|&i, &j| sc[j].partial_cmp(&sc[i]).unwrap_or(std::cmp::Ordering::Equal));
                    let mut kept: Vec<usize> = Vec::new();
                    for i in order {
                        if kept.len() as i64 >= max_out {
                            break;
                        }
                        if kept.iter().all(|&k| iou(&cs[k], &cs[i]) <= iou_t) {
                            kept.push(i);
                            selected.extend_from_slice(&[b as i64, c as i64, i as i64]);
                        }
                    }
                }
            }
        }
        let rows = selected.len() / 3;
        Ok(vec![Some(Tensor::from_i64(&[rows, 3], selected, ctx.device).into())])
    }
}
