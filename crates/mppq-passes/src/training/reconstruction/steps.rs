//! What each training step sees: one cached batch, or `batches_per_step` of them joined along
//! the batch axis (the papers train on batches of 32 images; a step on one image is a noisy
//! gradient, and the per-weight work of a step — rounding variables, regulariser — is paid once
//! for all images joined).
//!
//! Joining is safe only along a real batch axis. A block input or target is joined when it
//! differs between entries and its first axis has the calibration batch's size (the leading size
//! of the graph inputs): a per-sample tensor without a batch axis (a sequence `[S, N, D]` inside
//! a recurrent model) does not qualify, and the block then trains one entry per step. A value
//! equal in every entry (computed from constants) is passed once.

use mppq_exec::{Tensor, Value};

/// The data of one training step.
pub(super) struct StepData {
    /// Block inputs by name.
    pub feeds: Vec<(String, Value)>,
    /// Float targets, one per block output.
    pub targets: Vec<Tensor>,
    /// Σ of the targets' squared values (the loss is relative to it).
    pub energy: f64,
}

/// The cached entries in the fixed, well-mixed order steps visit them.
fn visiting_order(entries: usize) -> Vec<usize> {
    // 7919 is prime: i·7919 mod n visits every entry once per n steps when n is not its multiple.
    let mut order: Vec<usize> = (0..entries).map(|i| (i * 7919) % entries.max(1)).collect();
    order.dedup();
    if order.len() != entries {
        order = (0..entries).collect();
    }
    order
}

/// One step's data per group of `per_step` entries, in visiting order; one entry per step when
/// the entries cannot be joined (see the module doc). `lead` is the calibration batch's size.
pub(super) fn step_data(
    feeds: Vec<Vec<(String, Value)>>,
    targets: &[Vec<Tensor>],
    energies: &[f64],
    per_step: usize,
    lead: Option<usize>,
) -> Vec<StepData> {
    let order = visiting_order(feeds.len());
    let single = |i: usize| StepData { feeds: feeds[i].clone(), targets: targets[i].clone(), energy: energies[i] };
    if per_step > 1
        && let Some(lead) = lead
    {
        let joined: Option<Vec<StepData>> = order
            .chunks(per_step)
            .map(|group| {
                let names = feeds[group[0]].iter().map(|(n, _)| n.clone());
                let feed_values: Option<Vec<Value>> = (0..feeds[group[0]].len())
                    .map(|slot| join(group.iter().map(|&i| feeds[i][slot].1.clone()).collect(), lead))
                    .collect();
                let target_values: Option<Vec<Tensor>> = (0..targets[group[0]].len())
                    .map(|slot| {
                        let values = group.iter().map(|&i| Value::Tensor(targets[i][slot].clone())).collect();
                        join(values, lead).and_then(|v| v.as_tensor().cloned())
                    })
                    .collect();
                Some(StepData {
                    feeds: names.zip(feed_values?).collect(),
                    targets: target_values?,
                    energy: group.iter().map(|&i| energies[i]).sum(),
                })
            })
            .collect();
        if let Some(joined) = joined {
            return joined;
        }
    }
    order.into_iter().map(single).collect()
}

/// One value for a group: the first when all are equal, the tensors joined along axis 0 when
/// each has `lead` rows and the same shape and type otherwise; `None` when neither holds (and
/// for sequences and optionals).
fn join(values: Vec<Value>, lead: usize) -> Option<Value> {
    let first = values.first()?.clone();
    let tensors: Vec<&Tensor> = values.iter().filter_map(Value::as_tensor).collect();
    if tensors.len() != values.len() {
        return None; // sequences and optionals: not joined
    }
    let (shape, dtype) = (tensors[0].shape(), tensors[0].dtype());
    let same_layout = tensors.iter().all(|t| t.shape() == shape && t.dtype() == dtype);
    let bits = |t: &Tensor| t.to_f64_vec().into_iter().map(f64::to_bits).collect::<Vec<_>>();
    let reference = bits(tensors[0]);
    if same_layout && tensors[1..].iter().all(|t| bits(t) == reference) {
        return Some(first);
    }
    if !same_layout || shape.first() != Some(&lead) {
        return None;
    }
    Some(Value::Tensor(Tensor::cat(tensors.into_iter().cloned().collect(), 0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_exec::Device;

    fn t(shape: &[usize], values: Vec<f32>) -> Tensor {
        Tensor::from_f32(shape, values, &Device::cpu())
    }

    #[test]
    fn batch_axes_are_joined_constants_passed_once_and_sequences_left_alone() {
        let entries = 3;
        let feeds: Vec<Vec<(String, Value)>> = (0..entries)
            .map(|i| {
                vec![
                    ("x".to_string(), Value::Tensor(t(&[1, 2], vec![i as f32, 1.0]))),
                    ("mask".to_string(), Value::Tensor(t(&[2, 2], vec![1.0, 0.0, 0.0, 1.0]))),
                ]
            })
            .collect();
        let targets: Vec<Vec<Tensor>> = (0..entries).map(|i| vec![t(&[1, 1], vec![i as f32 * 2.0])]).collect();
        let energies = [0.0, 4.0, 16.0];
        let steps = step_data(feeds.clone(), &targets, &energies, 2, Some(1));
        assert_eq!(steps.len(), 2, "3 entries in groups of 2");
        assert_eq!(steps[0].feeds[0].1.as_tensor().unwrap().shape(), [2, 2]);
        assert_eq!(steps[0].feeds[1].1.as_tensor().unwrap().shape(), [2, 2], "the constant mask once");
        assert_eq!(steps[0].targets[0].shape(), [2, 1]);
        let first_group: f64 = visiting_order(3)[..2].iter().map(|&i| energies[i]).sum();
        assert_eq!(steps[0].energy, first_group);
        // Entries joined in the same order in feeds and targets.
        let x = steps[0].feeds[0].1.as_tensor().unwrap().to_f32_vec();
        let y = steps[0].targets[0].to_f32_vec();
        assert_eq!([x[0] * 2.0, x[2] * 2.0], [y[0], y[1]]);
        // A per-sample tensor whose first axis is not the batch's: one entry per step.
        let seq: Vec<Vec<(String, Value)>> =
            (0..entries).map(|i| vec![("s".to_string(), Value::Tensor(t(&[4, 1], vec![i as f32; 4])))]).collect();
        let steps = step_data(seq, &targets, &energies, 2, Some(1));
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0].feeds[0].1.as_tensor().unwrap().shape(), [4, 1]);
        // One per step unless asked.
        assert_eq!(step_data(feeds, &targets, &energies, 1, Some(1)).len(), 3);
    }
}
