//! `block_reconstruction`: BRECQ (Li et al., 2021; PPQ's `BlockwiseReconstructionPass`) in
//! QDrop's form (Wei et al., 2022). Like AdaRound, weights learn their rounding, but a block at a
//! time: blocks are single-entry/single-exit sub-graphs found automatically (a residual block,
//! say), so the rounding of one layer can make up for the error of the next. By default the
//! activation scales are learned too (LSQ) and each training step leaves half of the activation
//! elements in float (`drop` = 0.5), as QDrop does; `drop = 0` and `activation_scale = false`
//! give BRECQ as published. The engine is [`crate::reconstruction`].

use crate::error::Result;
use crate::guard::Guard;
use crate::pass::{Pass, PassContext, PassReport};
use crate::reconstruction::{BlockKind, Learned, ReconstructionSetting, reconstruct};

/// The pass.
#[derive(Default)]
pub struct BlockReconstruction {
    pub setting: ReconstructionSetting,
}

impl BlockReconstruction {
    pub const LEARNED: Learned = Learned {
        blocks: BlockKind::Block,
        rounding: true,
        weights: false,
        weight_scale: false,
        activation_scale: true,
        drop: 0.5,
    };
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
