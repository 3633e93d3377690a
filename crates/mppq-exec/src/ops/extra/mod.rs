//! Unique, CenterCropPad, Det and signal processing (DFT, STFT, windows, mel filters): less
//! common operators.

use crate::registry::OpRegistry;

mod center_crop_pad;
mod det;
mod dft;
mod mel;
mod stft;
mod unique;
mod util;
mod window;

pub fn register(r: &mut OpRegistry) {
    center_crop_pad::register(r);
    det::register(r);
    dft::register(r);
    mel::register(r);
    stft::register(r);
    unique::register(r);
    window::register(r);
}

#[cfg(test)]
mod tests;
