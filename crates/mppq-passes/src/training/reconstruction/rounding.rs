//! AdaRound's learned rounding of one weight (Nagel et al., 2020): a rectified-sigmoid variable
//! per element, the soft-quantized weight it gives, the annealed regulariser that pushes it to
//! 0 or 1, and the weight on its grid once learned. The same variable, thresholded in the
//! forward with a straight-through gradient, is PPQ's round tuning (`hard`).

use crate::runtime::params::ParamView;
use burn::backend::ops::{ActivationOps, BoolTensorOps, FloatTensorOps};
use burn::backend::{Dispatch, DispatchTensor};
use burn::tensor::Scalar;
use mppq_exec::simulation::training::require_grad;
use mppq_exec::{Device, Tensor};
use mppq_ir::VarId;
use mppq_ir::quant::TensorQuantConfig;

/// AdaRound's rectified sigmoid: `clamp(σ(V)·(ζ − γ) + γ, 0, 1)`, ζ = 1.1, γ = −0.1.
const ZETA: f64 = 1.1;
const GAMMA: f64 = -0.1;

/// One weight whose rounding is learned.
pub(super) struct RoundedWeight {
    pub(super) var: VarId,
    view: ParamView,
    config: TensorQuantConfig,
    /// `floor(w / s)` per element.
    floor: Vec<f32>,
    /// The rounding variable (tracked), shape of the weight.
    pub(super) v: DispatchTensor,
    /// `(scale, offset)` shaped to broadcast over the weight.
    scale: DispatchTensor,
    offset: DispatchTensor,
    floor_t: DispatchTensor,
    /// Round tuning: the forward rounds each element up (`h(V) ≥ ½`) or down.
    hard: bool,
}

fn broadcast(values: &[f32], rank: usize, axis: Option<usize>, device: &Device) -> DispatchTensor {
    let mut shape = vec![1usize; rank];
    if let Some(a) = axis {
        shape[a] = values.len();
    }
    Tensor::from_f32(&shape, values.to_vec(), device).into_dispatch()
}

impl RoundedWeight {
    /// `None` when the config's parameters do not fit the weight (one per channel of its axis).
    pub(super) fn new(
        var: VarId,
        view: ParamView,
        config: TensorQuantConfig,
        hard: bool,
        device: &Device,
    ) -> Option<Self> {
        let channels = config.channel_axis.map_or(Some(1), |a| view.shape.get(a).copied())?;
        if config.scale.len() != channels || config.offset.len() != channels {
            return None;
        }
        let rank = view.shape.len();
        let channel = |i: usize| match config.channel_axis {
            Some(a) => (i / view.shape[a + 1..].iter().product::<usize>().max(1)) % view.shape[a],
            None => 0,
        };
        let mut floor = Vec::with_capacity(view.values.len());
        let mut init = Vec::with_capacity(view.values.len());
        for (i, w) in view.values.iter().enumerate() {
            let v = w / config.scale[channel(i)];
            let f = v.floor();
            let rest = f64::from(v - f).clamp(1e-4, 1.0 - 1e-4);
            floor.push(f);
            // h(V) = rest at the start: soft rounding starts at the float weight.
            init.push((-((ZETA - GAMMA) / (rest - GAMMA) - 1.0).ln()) as f32);
        }
        let v = require_grad(Tensor::from_f32(&view.shape, init, device).into_dispatch());
        let scale = broadcast(&config.scale, rank, config.channel_axis, device);
        let offset = broadcast(&config.offset, rank, config.channel_axis, device);
        let floor_t = Tensor::from_f32(&view.shape, floor.clone(), device).into_dispatch();
        Some(Self { var, view, config, floor, v, scale, offset, floor_t, hard })
    }

    /// `h(V)`, tracked.
    fn soft(&self) -> DispatchTensor {
        let s = Dispatch::sigmoid(self.v.clone());
        let h =
            Dispatch::float_add_scalar(Dispatch::float_mul_scalar(s, Scalar::from(ZETA - GAMMA)), Scalar::from(GAMMA));
        Dispatch::float_clamp(h, Scalar::from(0.0), Scalar::from(1.0))
    }

    /// What the forward adds to `floor`: `h(V)`, or for round tuning `[h(V) ≥ ½]` whose
    /// gradient is `h`'s (straight through).
    fn rounding(&self) -> DispatchTensor {
        let h = self.soft();
        if !self.hard {
            return h;
        }
        let detached = Dispatch::float_detach(h.clone());
        let bool_dtype = mppq_exec::tensor::bool_for(&detached);
        let up = Dispatch::bool_into_float(
            Dispatch::float_greater_equal_elem(detached.clone(), Scalar::from(0.5), bool_dtype),
            burn::tensor::FloatDType::F32,
        );
        Dispatch::float_add(up, Dispatch::float_sub(h, detached))
    }

    /// The weight the forward uses: `s · (clamp(floor + h + o, q_min, q_max) − o)`, `h` from
    /// [`Self::rounding`] (soft for AdaRound; on the grid for round tuning).
    pub(super) fn weight(&self) -> DispatchTensor {
        let q = Dispatch::float_add(Dispatch::float_add(self.floor_t.clone(), self.rounding()), self.offset.clone());
        let q = Dispatch::float_clamp(q, Scalar::from(self.config.quant_min), Scalar::from(self.config.quant_max));
        Dispatch::float_mul(Dispatch::float_sub(q, self.offset.clone()), self.scale.clone())
    }

    /// `Σ 1 − |2h − 1|^β`, tracked: 0 once every element rounds up or down.
    pub(super) fn regularizer(&self, beta: f64) -> DispatchTensor {
        let d = Dispatch::float_abs(Dispatch::float_sub_scalar(
            Dispatch::float_mul_scalar(self.soft(), Scalar::from(2.0)),
            Scalar::from(1.0),
        ));
        let p = Dispatch::float_powf_scalar(d, Scalar::from(beta));
        Dispatch::float_sum(Dispatch::float_neg(Dispatch::float_sub_scalar(p, Scalar::from(1.0))))
    }

    /// Share of elements whose soft rounding is within 1 % of 0 or 1 (all of them for round
    /// tuning, whose forward is always on the grid).
    pub(super) fn settled(&self) -> f64 {
        if self.hard {
            return 1.0;
        }
        let h = Tensor::from_dispatch(Dispatch::float_detach(self.soft())).to_f32_vec();
        let n = h.len().max(1);
        h.iter().filter(|h| (2.0 * **h - 1.0).abs() > 0.98).count() as f64 / n as f64
    }

    /// The weight on its grid with every element rounded as learned (V ≥ 0: up).
    pub(super) fn hard(&self) -> ParamView {
        let v = Tensor::from_dispatch(Dispatch::float_detach(self.v.clone())).to_f32_vec();
        let c = &self.config;
        let mut view = self.view.clone();
        let channel = |i: usize| match c.channel_axis {
            Some(a) => (i / view.shape[a + 1..].iter().product::<usize>().max(1)) % view.shape[a],
            None => 0,
        };
        let values = (0..self.floor.len())
            .map(|i| {
                let (s, o) = (c.scale[channel(i)], c.offset[channel(i)]);
                let q = (self.floor[i] + if v[i] >= 0.0 { 1.0 } else { 0.0 } + o)
                    .clamp(c.quant_min as f32, c.quant_max as f32);
                (q - o) * s
            })
            .collect();
        view.values = values;
        view
    }
}
