//! Loss functions, cumulative product, Unique, integer and quantized linear algebra, signal
//! processing (DFT, STFT, windows, mel filters) and other less common operators.

use crate::registry::OpRegistry;

mod center_crop_pad;
mod cumprod;
mod det;
mod dft;
mod mel;
mod stft;
mod unique;
mod util;
mod window;

pub fn register(r: &mut OpRegistry) {
    center_crop_pad::register(r);
    cumprod::register(r);
    det::register(r);
    dft::register(r);
    mel::register(r);
    stft::register(r);
    unique::register(r);
    window::register(r);
}

#[cfg(test)]
mod tests;
