//! `block_reconstruction`: BRECQ (Li et al., 2021; PPQ's `BlockwiseReconstructionPass`), with
//! QDrop (Wei et al., 2022) as an option. Like AdaRound, weights learn their rounding, but a
//! block at a time: blocks are single-entry/single-exit sub-graphs found automatically (a
//! residual block, say), so the rounding of one layer can make up for the error of the next.
//! `drop = 0.5, activation_scale = true` is QDrop's form: activation scales learned too (LSQ)
//! and half of the activation elements left in float in each step. It wins on the digits CNN
//! at 2-bit weights but lost held-out accuracy on a real classifier whose calibration set is
//! small (`docs/training.md`), so it is not the default. The engine is
//! [`crate::training::reconstruction`].

use crate::error::Result;
use crate::runtime::guard::Guard;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::training::adaround::AdaRound;
use crate::training::reconstruction::{BlockKind, Learned, ReconstructionSetting, reconstruct};

/// The pass.
#[derive(Default)]
pub struct BlockReconstruction {
    pub setting: ReconstructionSetting,
}

impl BlockReconstruction {
    /// AdaRound's learning, a block at a time.
    pub const LEARNED: Learned = Learned { blocks: BlockKind::Block, ..AdaRound::LEARNED };
}

impl Pass for BlockReconstruction {
    fn name(&self) -> &'static str {
        "block_reconstruction"
    }

    fn guard(&self) -> Guard {
        Guard::Measure
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        reconstruct(ctx, self.name(), &self.setting, Self::LEARNED)
    }
}
