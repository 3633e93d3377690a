//! Training passes on Burn's autodiff, all on the block-reconstruction engine
//! ([`reconstruction`]): [`adaround`], [`round_tuning`], [`block_reconstruction`] (BRECQ/QDrop)
//! and [`lsq`].

pub mod adaround;
pub mod block_reconstruction;
pub mod lsq;
pub mod reconstruction;
pub mod round_tuning;
#[cfg(test)]
mod tests;
