//! Sequences and optionals (construct, insert, erase, split, concatenate, map) and Scan.

use crate::registry::OpRegistry;

mod at;
mod concat_from_sequence;
mod construct;
mod empty;
mod erase;
mod insert;
mod length;
mod optional;
mod scan;
mod sequence_map;
mod split_to_sequence;
#[cfg(test)]
mod tests;
mod util;

pub fn register(r: &mut OpRegistry) {
    construct::register(r);
    empty::register(r);
    at::register(r);
    insert::register(r);
    erase::register(r);
    length::register(r);
    concat_from_sequence::register(r);
    split_to_sequence::register(r);
    sequence_map::register(r);
    optional::register(r);
    scan::register(r);
}
