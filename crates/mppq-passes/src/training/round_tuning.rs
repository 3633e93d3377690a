//! `round_tuning`: PPQ's `RoundTuningPass` ("Up or Down?", the idea AdaRound starts from, in
//! its most direct form). Per block, each weight element rounds up or down in every forward,
//! starting from round-to-nearest; a straight-through gradient moves the rounding variable and
//! an element flips where that lowers the block's output error. No regulariser: the forward is
//! always on the grid, so what trains is what is exported. The engine is
//! [`crate::training::reconstruction`].

use crate::error::Result;
use crate::runtime::guard::Guard;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::training::block_reconstruction::BlockReconstruction;
use crate::training::reconstruction::{Learned, ReconstructionSetting, reconstruct};

/// The pass.
#[derive(Default)]
pub struct RoundTuning {
    pub setting: ReconstructionSetting,
}

impl RoundTuning {
    /// Block reconstruction's learning with hard rounding, at a rate where a step flips few
    /// elements.
    pub const LEARNED: Learned = Learned { hard_rounding: true, rounding_rate: 1e-3, ..BlockReconstruction::LEARNED };
}

impl Pass for RoundTuning {
    fn name(&self) -> &'static str {
        "round_tuning"
    }

    fn guard(&self) -> Guard {
        Guard::Measure
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        reconstruct(ctx, self.name(), &self.setting, Self::LEARNED)
    }
}
