//! Signal processing: DFT, STFT, the Hann/Hamming/Blackman windows and MelWeightMatrix (ONNX
//! defines them in `math`; they are kept together here).

use crate::registry::OpRegistry;

mod dft;
mod mel;
mod stft;
mod window;

pub fn register(r: &mut OpRegistry) {
    dft::register(r);
    mel::register(r);
    stft::register(r);
    window::register(r);
}
