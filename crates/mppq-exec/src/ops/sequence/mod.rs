//! Sequences (ONNX's `sequence` operators): construct, insert, erase, split, concatenate, map.

use crate::registry::OpRegistry;

mod at;
mod concat_from_sequence;
mod construct;
mod empty;
mod erase;
mod insert;
mod length;
mod sequence_map;
mod split_to_sequence;
#[cfg(test)]
mod tests;

pub fn register(r: &mut OpRegistry) {
    at::register(r);
    concat_from_sequence::register(r);
    construct::register(r);
    empty::register(r);
    erase::register(r);
    insert::register(r);
    length::register(r);
    sequence_map::register(r);
    split_to_sequence::register(r);
}
