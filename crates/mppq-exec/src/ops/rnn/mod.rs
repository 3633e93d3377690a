//! Recurrent layers (ONNX's `rnn` operators): RNN, GRU and LSTM.

use crate::registry::OpRegistry;

mod recurrent;

pub fn register(r: &mut OpRegistry) {
    recurrent::register(r);
}
