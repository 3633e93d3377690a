//! `adaround`: AdaRound (Nagel et al., 2020; PPQ's `AdaroundPass`). Each weight operation (with
//! its fused activation) learns, per weight element, whether to round up or down, so that its
//! quantized output matches the float output on the calibration data; the engine is
//! [`crate::training::reconstruction`]. Weights are then written as their grid values.

use crate::error::Result;
use crate::runtime::guard::Guard;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::training::reconstruction::{BlockKind, Learned, ReconstructionSetting, reconstruct};

/// The pass.
#[derive(Default)]
pub struct AdaRound {
    pub setting: ReconstructionSetting,
}

impl AdaRound {
    pub const LEARNED: Learned = Learned {
        blocks: BlockKind::Layer,
        rounding: true,
        rounding_rate: 3e-2,
        hard_rounding: false,
        weights: false,
        weight_scale: false,
        activation_scale: false,
        activation_offset: false,
        drop: 0.0,
    };
}

impl Pass for AdaRound {
    fn name(&self) -> &'static str {
        "adaround"
    }

    fn guard(&self) -> Guard {
        Guard::Measure
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        reconstruct(ctx, self.name(), &self.setting, Self::LEARNED)
    }
}
