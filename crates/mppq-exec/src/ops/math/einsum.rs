//! Einsum: explicit and implicit output, ellipsis broadcasting, repeated subscripts within an
//! operand (diagonals), summed-out subscripts. Operands are reduced one by one into a running
//! product; each pairwise contraction is a batched matmul on Burn.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, broadcast_shapes};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Einsum", 12, build);
}

struct Einsum {
    inputs: Vec<String>,
    output: Option<String>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let eq: String = node.string("equation", "")?.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let valid =
        |s: &str| s.replace("...", "").chars().all(|c| c.is_ascii_alphabetic()) && s.matches("...").count() <= 1;
    let inputs: Vec<String> = lhs.split(',').map(str::to_string).collect();
    if !inputs.iter().all(|s| valid(s)) || !rhs.as_deref().is_none_or(valid) {
        return Err(node.err(format!("invalid equation {eq:?}")));
    }
    if let Some(r) = &rhs {
        let letters: Vec<char> = r.chars().filter(char::is_ascii_alphabetic).collect();
        if (1..letters.len()).any(|i| letters[..i].contains(&letters[i])) {
            return Err(node.err(format!("output subscripts of {eq:?} repeat a label")));
        }
    }
    Ok(Box::new(Einsum { inputs, output: rhs }))
}

/// An operand in flight: its tensor and one label per axis (ellipsis axes get labels >= 128).
struct Term {
    t: Tensor,
    labels: Vec<u32>,
}

/// Expands `sub` for an operand of `rank` into labels; ellipsis axes are labelled
/// `128 + k` counted from the right so they broadcast across operands.
fn labels(sub: &str, rank: usize) -> Option<Vec<u32>> {
    match sub.split_once("...") {
        None => {
            let l: Vec<u32> = sub.chars().map(|c| c as u32).collect();
            (l.len() == rank).then_some(l)
        }
        Some((a, b)) => {
            let fixed = a.len() + b.len();
            let ell = rank.checked_sub(fixed)?;
            let mut l: Vec<u32> = a.chars().map(|c| c as u32).collect();
            l.extend((0..ell).map(|k| 128 + (ell - 1 - k) as u32));
            l.extend(b.chars().map(|c| c as u32));
            Some(l)
        }
    }
}

fn sum_axes(t: Tensor, axes: &[usize]) -> Tensor {
    if axes.is_empty() {
        return t;
    }
    let shape = t.shape();
    let mut d = t.into_dispatch();
    for &a in axes {
        d = Dispatch::float_sum_dim(d, a);
    }
    let keep: Vec<usize> = shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &s)| s).collect();
    Tensor::from_dispatch(d).reshape(&keep)
}

/// Takes the diagonal of every repeated label, so each label appears once.
fn diagonals(ctx: &KernelContext<'_>, mut term: Term) -> Result<Term> {
    loop {
        let l = &term.labels;
        let Some((i, j)) = (0..l.len()).find_map(|i| (i + 1..l.len()).find(|&j| l[j] == l[i]).map(|j| (i, j))) else {
            return Ok(term);
        };
        let shape = term.t.shape();
        if shape[i] != shape[j] {
            return Err(shape_err(ctx, shape, vec![], "a repeated subscript has different sizes"));
        }
        let d = shape[i];
        let mut perm: Vec<usize> = (0..shape.len()).filter(|&k| k != i && k != j).collect();
        perm.extend([i, j]);
        let mut flat: Vec<usize> = perm[..perm.len() - 2].iter().map(|&k| shape[k]).collect();
        flat.push(d * d);
        let t = term.t.permute(&perm).reshape(&flat);
        let idx = Tensor::from_i64(&[d], (0..d as i64).map(|k| k * (d as i64 + 1)).collect(), ctx.device);
        let t = t.select(flat.len() - 1, &idx);
        let mut labels: Vec<u32> = perm[..perm.len() - 2].iter().map(|&k| term.labels[k]).collect();
        labels.push(term.labels[i]);
        term = Term { t, labels };
    }
}

/// Contracts `a` and `b`, summing the labels not in `keep`.
fn contract(ctx: &KernelContext<'_>, a: Term, b: Term, keep: &[u32]) -> Result<Term> {
    let (sa, sb) = (a.t.shape(), b.t.shape());
    let size = |t: &Term, s: &[usize], l: u32| t.labels.iter().position(|&x| x == l).map(|p| s[p]);
    let shared: Vec<u32> = a.labels.iter().copied().filter(|l| b.labels.contains(l)).collect();
    let batch: Vec<u32> = shared.iter().copied().filter(|l| keep.contains(l)).collect();
    let summed: Vec<u32> = shared.iter().copied().filter(|l| !keep.contains(l)).collect();
    let a_only: Vec<u32> = a.labels.iter().copied().filter(|l| !shared.contains(l)).collect();
    let b_only: Vec<u32> = b.labels.iter().copied().filter(|l| !shared.contains(l)).collect();
    // Broadcast sizes of shared labels (ellipsis axes of size 1 broadcast).
    let dim = |l: u32| -> Result<usize> {
        let (x, y) = (size(&a, &sa, l).unwrap_or(1), size(&b, &sb, l).unwrap_or(1));
        broadcast_shapes(&[x], &[y])
            .map(|v| v[0])
            .ok_or_else(|| shape_err(ctx, sa.clone(), sb.clone(), "subscript sizes differ"))
    };
    let bsz: Vec<usize> = batch.iter().map(|&l| dim(l)).collect::<Result<_>>()?;
    let ksz: Vec<usize> = summed.iter().map(|&l| dim(l)).collect::<Result<_>>()?;
    let msz: Vec<usize> = a_only.iter().map(|&l| size(&a, &sa, l).unwrap_or(1)).collect();
    let nsz: Vec<usize> = b_only.iter().map(|&l| size(&b, &sb, l).unwrap_or(1)).collect();
    let order = |t: &Term, groups: [&[u32]; 3]| -> Vec<usize> {
        groups.iter().flat_map(|g| g.iter().map(|l| t.labels.iter().position(|x| x == l).unwrap_or(0))).collect()
    };
    let pa = order(&a, [&batch, &a_only, &summed]);
    let pb = order(&b, [&batch, &summed, &b_only]);
    let full_a: Vec<usize> = bsz.iter().chain(&msz).chain(&ksz).copied().collect();
    let full_b: Vec<usize> = bsz.iter().chain(&ksz).chain(&nsz).copied().collect();
    let (bn, m, k, n) = (
        bsz.iter().product::<usize>(),
        msz.iter().product::<usize>(),
        ksz.iter().product::<usize>(),
        nsz.iter().product::<usize>(),
    );
    let ta = a.t.permute(&pa).expand(&full_a).reshape(&[bn, m, k]);
    let tb = b.t.permute(&pb).expand(&full_b).reshape(&[bn, k, n]);
    let y = Dispatch::float_matmul(ta.into_dispatch(), tb.into_dispatch());
    let out: Vec<usize> = bsz.iter().chain(&msz).chain(&nsz).copied().collect();
    let labels: Vec<u32> = batch.iter().chain(&a_only).chain(&b_only).copied().collect();
    Ok(Term { t: Tensor::from_dispatch(y).reshape(&out), labels })
}

impl Kernel for Einsum {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let tensors = ins.rest(0)?;
        if tensors.len() != self.inputs.len() || tensors.is_empty() {
            return Err(ctx.err(format!(
                "equation has {} operands, node has {} inputs",
                self.inputs.len(),
                tensors.len()
            )));
        }
        // ONNX gives every operand the one type T; mixed float widths reached Burn's matmul,
        // which asserts (found by fuzzing).
        if let Some(other) = tensors.iter().find(|t| t.dtype() != tensors[0].dtype()) {
            return Err(ctx.err(format!(
                "operands have different types: {} and {}",
                tensors[0].dtype(),
                other.dtype()
            )));
        }
        let mut terms = Vec::new();
        let mut ell_rank = 0;
        for (t, sub) in tensors.into_iter().zip(&self.inputs) {
            let t = float_tensor(ctx, t, "operand")?;
            let Some(l) = labels(sub, t.rank()) else {
                return Err(shape_err(ctx, t.shape(), vec![], format!("does not match subscripts {sub:?}")));
            };
            ell_rank = ell_rank.max(l.iter().filter(|&&x| x >= 128).count());
            terms.push(diagonals(ctx, Term { t, labels: l })?);
        }
        let out: Vec<u32> = match &self.output {
            Some(o) => {
                let mut l: Vec<u32> = Vec::new();
                for part in o.split("...").enumerate() {
                    if part.0 == 1 {
                        l.extend((0..ell_rank).map(|k| 128 + (ell_rank - 1 - k) as u32));
                    }
                    l.extend(part.1.chars().map(|c| c as u32));
                }
                l
            }
            None => {
                let mut l: Vec<u32> = (0..ell_rank).map(|k| 128 + (ell_rank - 1 - k) as u32).collect();
                let mut letters: Vec<u32> = self
                    .inputs
                    .iter()
                    .flat_map(|s| s.chars().filter(|c| c.is_ascii_alphabetic()).map(|c| c as u32))
                    .collect();
                letters.sort_unstable();
                let once: Vec<u32> =
                    letters.iter().copied().filter(|c| letters.iter().filter(|x| *x == c).count() == 1).collect();
                l.extend(once);
                l
            }
        };
        let mut iter = terms.into_iter().enumerate();
        let Some((_, mut acc)) = iter.next() else { return Err(ctx.err("no operands")) };
        let rest: Vec<(usize, Term)> = iter.collect();
        let later_labels = |from: usize, rest: &[(usize, Term)]| -> Vec<u32> {
            let mut k = out.clone();
            for (i, t) in rest {
                if *i >= from {
                    k.extend(&t.labels);
                }
            }
            k
        };
        // Sum labels of the first operand used nowhere else.
        let keep = later_labels(1, &rest);
        let drop: Vec<usize> = (0..acc.labels.len()).filter(|&i| !keep.contains(&acc.labels[i])).collect();
        acc = Term {
            labels: acc.labels.iter().enumerate().filter(|(i, _)| !drop.contains(i)).map(|(_, &l)| l).collect(),
            t: sum_axes(acc.t, &drop),
        };
        for idx in 0..rest.len() {
            let i = rest[idx].0;
            let keep = later_labels(i + 1, &rest);
            let b = Term { t: rest[idx].1.t.clone(), labels: rest[idx].1.labels.clone() };
            // Labels of b used nowhere else are summed first.
            let mut keep_b = keep.clone();
            keep_b.extend(&acc.labels);
            let drop: Vec<usize> = (0..b.labels.len()).filter(|&j| !keep_b.contains(&b.labels[j])).collect();
            let b = Term {
                labels: b.labels.iter().enumerate().filter(|(j, _)| !drop.contains(j)).map(|(_, &l)| l).collect(),
                t: sum_axes(b.t, &drop),
            };
            acc = contract(ctx, acc, b, &keep)?;
        }
        if let Some(missing) = out.iter().find(|l| !acc.labels.contains(l)) {
            return Err(
                ctx.err(format!("output subscript {} is not in any input", char::from_u32(*missing).unwrap_or('?')))
            );
        }
        let perm: Vec<usize> = out.iter().map(|l| acc.labels.iter().position(|x| x == l).unwrap_or(0)).collect();
        let t = if perm.iter().copied().eq(0..perm.len()) { acc.t } else { acc.t.permute(&perm) };
        Ok(vec![Some(t.into())])
    }
}
