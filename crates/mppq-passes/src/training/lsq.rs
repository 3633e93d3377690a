//! `lsq`: learned step sizes (LSQ, Esser et al., 2020; PPQ's `LearnedStepSizePass`) after
//! calibration. Per block, the scales of weights and activations move (as learnable factors on
//! the calibrated scales, with LSQ's straight-through gradient) to bring the block's quantized
//! output to the float one; the engine is [`crate::training::reconstruction`].

use crate::error::Result;
use crate::runtime::guard::Guard;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::training::reconstruction::{BlockKind, Learned, ReconstructionSetting, reconstruct};

/// The pass.
#[derive(Default)]
pub struct Lsq {
    pub setting: ReconstructionSetting,
}

impl Lsq {
    pub const LEARNED: Learned = Learned {
        blocks: BlockKind::Block,
        rounding: false,
        rounding_rate: 3e-2,
        hard_rounding: false,
        weights: true,
        weight_scale: true,
        activation_scale: true,
        activation_offset: false,
        drop: 0.0,
    };
}

impl Pass for Lsq {
    fn name(&self) -> &'static str {
        "lsq"
    }

    fn guard(&self) -> Guard {
        Guard::Measure
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        reconstruct(ctx, self.name(), &self.setting, Self::LEARNED)
    }
}
