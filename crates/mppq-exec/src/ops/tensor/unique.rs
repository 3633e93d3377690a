//! Unique (flattened or along `axis`; sorted or in order of first occurrence): the grouping is
//! computed on the host from the downloaded values (it is data-dependent by nature); Y is then
//! gathered from the input with Burn, and indices, inverse_indices and counts are int64.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::host::axis;
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use std::cmp::Ordering;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Unique", 11, build);
}

struct Unique {
    axis: Option<i64>,
    sorted: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let axis = if node.has("axis") { Some(node.int("axis", 0)?) } else { None };
    Ok(Box::new(Unique { axis, sorted: node.int("sorted", 1)? != 0 }))
}

/// Groups equal rows: returns (first index of each unique row, inverse index of each row,
/// count of each unique row), unique rows sorted ascending or in order of first occurrence.
fn group<T: PartialOrd + Copy>(values: &[T], rows: usize, sorted: bool) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let width = values.len().checked_div(rows).unwrap_or(0);
    let row = |i: usize| &values[i * width..(i + 1) * width];
    let cmp = |a: usize, b: usize| -> Ordering {
        for (x, y) in row(a).iter().zip(row(b)) {
            match x.partial_cmp(y) {
                Some(Ordering::Equal) | None => {}
                Some(o) => return o,
            }
        }
        Ordering::Equal
    };
    let mut order: Vec<usize> = (0..rows).collect();
    order.sort_by(|&a, &b| cmp(a, b).then(a.cmp(&b)));
    // Groups in sorted order: (first index, members).
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for &i in &order {
        match groups.last_mut() {
            Some((first, members)) if cmp(*first, i) == Ordering::Equal => members.push(i),
            _ => groups.push((i, vec![i])),
        }
    }
    if !sorted {
        groups.sort_by_key(|g| g.0);
    }
    let mut inverse = vec![0; rows];
    let mut first = Vec::with_capacity(groups.len());
    let mut counts = Vec::with_capacity(groups.len());
    for (g, (f, members)) in groups.iter().enumerate() {
        first.push(*f);
        counts.push(members.len());
        for &m in members {
            inverse[m] = g;
        }
    }
    (first, inverse, counts)
}

impl Kernel for Unique {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let xs = x.shape();
        // Bring the unique axis first (flatten when there is none).
        let (x, a) = match self.axis {
            None => (x.reshape(&[xs.iter().product()]), 0),
            Some(ax) => (x, axis(ctx, ax, xs.len())?),
        };
        let shape = x.shape();
        let rows = shape[a];
        let mut perm: Vec<usize> = vec![a];
        perm.extend((0..shape.len()).filter(|d| *d != a));
        let moved = x.clone().permute(&perm);
        let (first, inverse, counts) = match x.kind() {
            Kind::Float => group(&moved.to_f64_vec(), rows, self.sorted),
            _ => group(&moved.to_i64_vec(), rows, self.sorted),
        };
        let to_i64 = |v: &[usize]| v.iter().map(|&i| i as i64).collect::<Vec<i64>>();
        let idx = Tensor::from_i64(&[first.len()], to_i64(&first), ctx.device);
        let y = x.select(a, &idx);
        let inv = Tensor::from_i64(&[inverse.len()], to_i64(&inverse), ctx.device);
        let cnt = Tensor::from_i64(&[counts.len()], to_i64(&counts), ctx.device);
        Ok(vec![Some(y.into()), Some(idx.into()), Some(inv.into()), Some(cnt.into())])
    }
}
