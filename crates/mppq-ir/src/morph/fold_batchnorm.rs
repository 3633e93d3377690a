//! Folds an inference-mode BatchNormalization into the Conv, ConvTranspose or Gemm before it:
//! `W' = W·γ/√(σ²+ε)` per output channel and `b' = (b − μ)·γ/√(σ²+ε) + β`.

use crate::attribute::Attribute;
use crate::dtype::DataType;
use crate::error::{IrError, Result};
use crate::graph::{Graph, OpId, VarId};
use crate::pattern::Pattern;
use crate::tensor::TensorData;

/// Folds every foldable (computing op → BatchNormalization) pair; returns how many were folded.
/// A pair is skipped, unchanged, when folding would be unsafe: the computing op's output has
/// other readers, weights are not float32 initializers or are shared with another op, the BN is
/// in training mode, or a Gemm bias has a shape that is not per-column.
pub fn fold_batchnorm(graph: &mut Graph) -> Result<usize> {
    let pattern = Pattern::chain(vec![
        Pattern::op_type(&["Conv", "ConvTranspose", "Gemm"]),
        Pattern::op_type(&["BatchNormalization"]),
    ])
    .map(Pattern::exclusive_chain);
    let Some(pattern) = pattern else { return Ok(0) };
    let mut folded = 0;
    for m in graph.find_pattern(&pattern) {
        let [op, bn] = m.ops[..] else { continue };
        // An earlier fold in this loop may have changed the graph.
        if graph.operation(op).is_err() || graph.operation(bn).is_err() {
            continue;
        }
        if let Some(plan) = plan_fold(graph, op, bn)? {
            apply(graph, op, bn, plan)?;
            folded += 1;
        }
    }
    Ok(folded)
}

struct FoldPlan {
    weight: TensorData,
    bias: TensorData,
}

fn f32_param(graph: &Graph, var: Option<VarId>) -> Option<Vec<f32>> {
    let v = graph.variable(var?).ok()?;
    let t = v.value.as_ref()?;
    (t.dtype() == DataType::Float).then(|| t.to_vec::<f32>().ok()).flatten()
}

fn plan_fold(graph: &Graph, op_id: OpId, bn_id: OpId) -> Result<Option<FoldPlan>> {
    let op = graph.operation(op_id)?;
    let bn = graph.operation(bn_id)?;
    let morph_err = |message: String| IrError::Morph { morph: "fold_batchnorm", op: op.name.clone(), message };
    // `spatial` = 0 (before opset 9): statistics per element, not per channel.
    if bn.output_ids().count() != 1 || bn.attr_int("training_mode", 0)? != 0 || bn.attr_int("spatial", 1)? == 0 {
        return Ok(None);
    }
    let bn_in = |i: usize| bn.inputs().get(i).copied().flatten();
    let (Some(gamma), Some(beta), Some(mean), Some(var)) = (
        f32_param(graph, bn_in(1)),
        f32_param(graph, bn_in(2)),
        f32_param(graph, bn_in(3)),
        f32_param(graph, bn_in(4)),
    ) else {
        return Ok(None);
    };
    let eps = bn.attr_float("epsilon", 1e-5)?;
    let channels = gamma.len();
    if [beta.len(), mean.len(), var.len()].iter().any(|l| *l != channels) {
        return Err(morph_err(format!("BatchNormalization `{}` has parameters of different lengths", bn.name)));
    }
    let scale: Vec<f32> = gamma.iter().zip(&var).map(|(g, v)| g / (v + eps).sqrt()).collect();

    let Some(w_id) = op.inputs().get(1).copied().flatten() else { return Ok(None) };
    // A weight read by another op must not change under it.
    if graph.consumers(w_id).len() != 1 {
        return Ok(None);
    }
    let Some(w_tensor) = graph.variable(w_id)?.value.as_ref() else { return Ok(None) };
    let Some(mut w) = f32_param(graph, Some(w_id)) else { return Ok(None) };
    let shape = w_tensor.shape().to_vec();
    let bias_id = op.inputs().get(2).copied().flatten();
    let old_bias = match bias_id {
        Some(id) => match f32_param(graph, Some(id)) {
            Some(b) => Some((b, graph.variable(id)?.value.as_ref().map(|t| t.shape().to_vec()).unwrap_or_default())),
            None => return Ok(None),
        },
        None => None,
    };

    // Per-output-channel weight scaling, and the bias before BN as a per-channel vector.
    let bias_before: Vec<f32> = match op.op_type.as_str() {
        "Conv" | "ConvTranspose" => {
            let group = usize::try_from(op.attr_int("group", 1)?).unwrap_or(1).max(1);
            if shape.len() < 2 {
                return Err(morph_err(format!("weight has rank {}", shape.len())));
            }
            let inner: usize = shape[2..].iter().product();
            let out_channels = if op.op_type == "Conv" { shape[0] } else { shape[1] * group };
            if out_channels != channels {
                return Err(morph_err(format!(
                    "{out_channels} output channels but BatchNormalization `{}` has {channels}",
                    bn.name
                )));
            }
            for (i, value) in w.iter_mut().enumerate() {
                let (d0, d1) = (i / (shape[1] * inner), (i / inner) % shape[1]);
                let oc = if op.op_type == "Conv" { d0 } else { (d0 / (shape[0] / group)) * shape[1] + d1 };
                *value *= scale[oc];
            }
            match old_bias {
                Some((b, _)) if b.len() == channels => b,
                Some(_) => return Ok(None),
                None => vec![0.0; channels],
            }
        }
        "Gemm" => {
            if shape.len() != 2 {
                return Ok(None);
            }
            let trans_b = op.attr_int("transB", 0)? != 0;
            let n = if trans_b { shape[0] } else { shape[1] };
            if n != channels {
                return Err(morph_err(format!("{n} output columns but BatchNormalization has {channels}")));
            }
            for (i, value) in w.iter_mut().enumerate() {
                let col = if trans_b { i / shape[1] } else { i % shape[1] };
                *value *= scale[col];
            }
            let beta_attr = op.attr_float("beta", 1.0)?;
            match old_bias {
                None => vec![0.0; channels],
                Some((b, s)) if b.len() == 1 && s.iter().product::<usize>() == 1 => vec![b[0] * beta_attr; channels],
                Some((b, s)) if b.len() == channels && s.last() == Some(&channels) => {
                    b.iter().map(|v| v * beta_attr).collect()
                }
                Some(_) => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    let bias: Vec<f32> = (0..channels).map(|c| (bias_before[c] - mean[c]) * scale[c] + beta[c]).collect();
    Ok(Some(FoldPlan { weight: TensorData::from_vec(shape, &w)?, bias: TensorData::from_vec(vec![channels], &bias)? }))
}

fn apply(graph: &mut Graph, op_id: OpId, bn_id: OpId, plan: FoldPlan) -> Result<()> {
    let op = graph.operation(op_id)?;
    let missing = |op: &str, what: &str| IrError::Morph {
        morph: "fold_batchnorm",
        op: op.to_string(),
        message: format!("has no {what}"),
    };
    let w_id = op.inputs().get(1).copied().flatten().ok_or_else(|| missing(&op.name, "weight input"))?;
    let old_bias = op.inputs().get(2).copied().flatten();
    let conv_out = op.outputs().first().copied().flatten().ok_or_else(|| missing(&op.name, "output"))?;
    let bn = graph.operation(bn_id)?;
    let bn_name = bn.name.clone();
    let bn_out = bn.outputs().first().copied().flatten().ok_or_else(|| missing(&bn.name, "output"))?;

    graph.variable_mut(w_id)?.value = Some(plan.weight);
    // Reuse the bias initializer only if nobody else reads it.
    match old_bias {
        Some(b) if graph.consumers(b).len() == 1 => graph.variable_mut(b)?.value = Some(plan.bias),
        _ => {
            let name = graph.fresh_var_name(&format!("{bn_name}_folded_bias"));
            let b = graph.add_initializer(name, plan.bias)?;
            if graph.operation(op_id)?.inputs().len() > 2 {
                graph.set_op_input(op_id, 2, Some(b))?;
            } else {
                graph.push_op_input(op_id, Some(b))?;
            }
        }
    }
    if graph.operation(op_id)?.op_type == "Gemm" {
        graph.operation_mut(op_id)?.attributes.insert("beta".into(), Attribute::Float(1.0));
    }
    // The computing op now writes the BN's output, so output names seen by users are kept.
    let bn_op = graph.remove_operation(bn_id)?;
    graph.set_op_output(op_id, 0, bn_out)?;
    graph.remove_variable(conv_out)?;
    for v in bn_op.input_ids().skip(1) {
        if graph.consumers(v).is_empty() && !graph.is_graph_input(v) && !graph.is_graph_output(v) {
            graph.remove_variable(v)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Operation;

    /// Naive NCHW convolution, stride 1, no padding, grouped, with bias.
    fn conv(x: &[f32], xs: [usize; 4], w: &[f32], ws: [usize; 4], b: &[f32], group: usize) -> Vec<f32> {
        let [n, c, h, wd] = xs;
        let [m, cg, kh, kw] = ws;
        let (oh, ow) = (h - kh + 1, wd - kw + 1);
        let mut y = vec![0.0; n * m * oh * ow];
        for ni in 0..n {
            for mi in 0..m {
                let g = mi / (m / group);
                for i in 0..oh {
                    for j in 0..ow {
                        let mut acc = b[mi];
                        for ci in 0..cg {
                            for a in 0..kh {
                                for bb in 0..kw {
                                    let xc = g * cg + ci;
                                    acc += x[((ni * c + xc) * h + i + a) * wd + j + bb]
                                        * w[((mi * cg + ci) * kh + a) * kw + bb];
                                }
                            }
                        }
                        y[((ni * m + mi) * oh + i) * ow + j] = acc;
                    }
                }
            }
        }
        y
    }

    fn pseudo(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    struct Bn {
        gamma: Vec<f32>,
        beta: Vec<f32>,
        mean: Vec<f32>,
        var: Vec<f32>,
    }

    fn bn_params(c: usize) -> Bn {
        Bn {
            gamma: pseudo(c, 1).iter().map(|v| v + 1.5).collect(),
            beta: pseudo(c, 2),
            mean: pseudo(c, 3),
            var: pseudo(c, 4).iter().map(|v| v + 1.2).collect(),
        }
    }

    fn add_bn(g: &mut Graph, input: VarId, p: &Bn, out: &str) -> VarId {
        let c = p.gamma.len();
        let mut ins = vec![Some(input)];
        for (name, v) in [("gamma", &p.gamma), ("beta", &p.beta), ("mean", &p.mean), ("var", &p.var)] {
            ins.push(Some(g.add_initializer(name, TensorData::from_vec(vec![c], v).unwrap()).unwrap()));
        }
        let y = g.ensure_variable(out);
        g.add_operation(
            Operation::new("BatchNormalization", "bn").with_attr("epsilon", Attribute::Float(1e-3)),
            &ins,
            &[Some(y)],
        )
        .unwrap();
        g.add_graph_output(y).unwrap();
        y
    }

    fn apply_bn(y: &[f32], p: &Bn, per: usize) -> Vec<f32> {
        y.iter()
            .enumerate()
            .map(|(i, v)| {
                let c = (i / per) % p.gamma.len();
                (v - p.mean[c]) / (p.var[c] + 1e-3).sqrt() * p.gamma[c] + p.beta[c]
            })
            .collect()
    }

    #[test]
    fn conv_bn_fold_matches_reference() {
        let (xs, ws) = ([1, 4, 5, 5], [6, 2, 3, 3]);
        let x = pseudo(100, 7);
        let w = pseudo(6 * 2 * 9, 8);
        let b = pseudo(6, 9);
        let p = bn_params(6);
        let expected = apply_bn(&conv(&x, xs, &w, ws, &b, 2), &p, 9);

        let mut g = Graph::new("g");
        let xv = g.ensure_variable("x");
        g.add_graph_input(xv).unwrap();
        let wv = g.add_initializer("w", TensorData::from_vec(ws.to_vec(), &w).unwrap()).unwrap();
        let bv = g.add_initializer("b", TensorData::from_vec(vec![6], &b).unwrap()).unwrap();
        let cv = g.ensure_variable("conv_out");
        let conv_id = g
            .add_operation(
                Operation::new("Conv", "conv").with_attr("group", Attribute::Int(2)),
                &[Some(xv), Some(wv), Some(bv)],
                &[Some(cv)],
            )
            .unwrap();
        let y = add_bn(&mut g, cv, &p, "y");

        assert_eq!(fold_batchnorm(&mut g).unwrap(), 1);
        assert_eq!(g.num_operations(), 1);
        assert_eq!(g.outputs(), &[y]);
        assert_eq!(g.producer(y), Some(conv_id));
        let w2 = g.variable(wv).unwrap().value.as_ref().unwrap().to_vec::<f32>().unwrap();
        let b2 = g.variable(bv).unwrap().value.as_ref().unwrap().to_vec::<f32>().unwrap();
        let got = conv(&x, xs, &w2, ws, &b2, 2);
        for (a, e) in got.iter().zip(&expected) {
            assert!((a - e).abs() < 1e-4, "{a} vs {e}");
        }
        g.validate(&Default::default()).unwrap();
    }

    #[test]
    fn gemm_bn_fold_matches_reference_with_trans_b_and_no_bias() {
        let (m, k, n) = (3, 4, 5);
        let a = pseudo(m * k, 11);
        let bt = pseudo(n * k, 12); // transB: shape [n, k]
        let p = bn_params(n);
        let gemm = |bt: &[f32], c: &[f32], alpha: f32| -> Vec<f32> {
            (0..m * n)
                .map(|i| {
                    let (r, col) = (i / n, i % n);
                    alpha * (0..k).map(|j| a[r * k + j] * bt[col * k + j]).sum::<f32>() + c[col]
                })
                .collect()
        };
        let expected = apply_bn(&gemm(&bt, &vec![0.0; n], 0.5), &p, 1);

        let mut g = Graph::new("g");
        let av = g.ensure_variable("a");
        g.add_graph_input(av).unwrap();
        let wv = g.add_initializer("w", TensorData::from_vec(vec![n, k], &bt).unwrap()).unwrap();
        let cv = g.ensure_variable("gemm_out");
        let op = Operation::new("Gemm", "gemm")
            .with_attr("transB", Attribute::Int(1))
            .with_attr("alpha", Attribute::Float(0.5));
        g.add_operation(op, &[Some(av), Some(wv)], &[Some(cv)]).unwrap();
        add_bn(&mut g, cv, &p, "y");

        assert_eq!(fold_batchnorm(&mut g).unwrap(), 1);
        let (gid, gop) = g.operations().next().unwrap();
        let w2 = g.variable(wv).unwrap().value.as_ref().unwrap().to_vec::<f32>().unwrap();
        let bias_id = gop.inputs()[2].unwrap();
        let c2 = g.variable(bias_id).unwrap().value.as_ref().unwrap().to_vec::<f32>().unwrap();
        let got = gemm(&w2, &c2, 0.5);
        for (a, e) in got.iter().zip(&expected) {
            assert!((a - e).abs() < 1e-4, "{a} vs {e}");
        }
        assert_eq!(g.operation(gid).unwrap().attr_float("beta", 0.0).unwrap(), 1.0);
    }

    #[test]
    fn conv_transpose_groups_scale_the_right_channels() {
        // 1x1 ConvTranspose, stride 1: y[o] = Σ_c x[c]·W[c, j] within group, o = g·(M/g) + j.
        let (c, m, group) = (4, 6, 2);
        let w = pseudo(c * (m / group), 21);
        let x = pseudo(c, 22);
        let p = bn_params(m);
        let convt = |w: &[f32], b: &[f32]| -> Vec<f32> {
            (0..m)
                .map(|o| {
                    let (gi, j) = (o / (m / group), o % (m / group));
                    let cg = c / group;
                    b[o] + (0..cg).map(|ci| x[gi * cg + ci] * w[(gi * cg + ci) * (m / group) + j]).sum::<f32>()
                })
                .collect()
        };
        let expected = apply_bn(&convt(&w, &vec![0.0; m]), &p, 1);
        let mut g = Graph::new("g");
        let xv = g.ensure_variable("x");
        g.add_graph_input(xv).unwrap();
        let wv = g.add_initializer("w", TensorData::from_vec(vec![c, m / group, 1, 1], &w).unwrap()).unwrap();
        let cv = g.ensure_variable("ct");
        g.add_operation(
            Operation::new("ConvTranspose", "ct").with_attr("group", Attribute::Int(2)),
            &[Some(xv), Some(wv)],
            &[Some(cv)],
        )
        .unwrap();
        add_bn(&mut g, cv, &p, "y");
        assert_eq!(fold_batchnorm(&mut g).unwrap(), 1);
        let op = g.operations().next().unwrap().1;
        let w2 = g.variable(wv).unwrap().value.as_ref().unwrap().to_vec::<f32>().unwrap();
        let b2 = g.variable(op.inputs()[2].unwrap()).unwrap().value.as_ref().unwrap().to_vec::<f32>().unwrap();
        for (a, e) in convt(&w2, &b2).iter().zip(&expected) {
            assert!((a - e).abs() < 1e-4, "{a} vs {e}");
        }
    }

    #[test]
    fn shared_conv_output_is_not_folded() {
        let mut g = Graph::new("g");
        let xv = g.ensure_variable("x");
        g.add_graph_input(xv).unwrap();
        let wv = g.add_initializer("w", TensorData::from_vec(vec![2, 1, 1, 1], &[1.0f32, 2.0]).unwrap()).unwrap();
        let cv = g.ensure_variable("c");
        g.add_operation(Operation::new("Conv", "conv"), &[Some(xv), Some(wv)], &[Some(cv)]).unwrap();
        add_bn(&mut g, cv, &bn_params(2), "y");
        g.add_graph_output(cv).unwrap();
        assert_eq!(fold_batchnorm(&mut g).unwrap(), 0);
        assert_eq!(g.num_operations(), 2);
    }
}
