//! Shape, layout and indexing operators (reshape, slicing, gathering, scattering, padding).

use crate::registry::OpRegistry;

mod compress;
mod concat;
mod constant;
mod constant_of_shape;
mod depth_space;
mod expand;
mod eye_like;
mod gather;
mod gather_elements;
mod gather_nd;
mod nonzero;
mod one_hot;
mod pad;
mod range;
mod reshape;
mod reverse_sequence;
mod scatter_elements;
mod scatter_nd;
mod shape_of;
mod slice;
mod split;
#[cfg(test)]
mod tests;
mod tile;
mod transpose;
mod trilu;
mod util;

pub fn register(r: &mut OpRegistry) {
    compress::register(r);
    concat::register(r);
    constant::register(r);
    constant_of_shape::register(r);
    depth_space::register(r);
    expand::register(r);
    eye_like::register(r);
    gather::register(r);
    gather_elements::register(r);
    gather_nd::register(r);
    nonzero::register(r);
    one_hot::register(r);
    pad::register(r);
    range::register(r);
    reshape::register(r);
    reverse_sequence::register(r);
    scatter_elements::register(r);
    scatter_nd::register(r);
    shape_of::register(r);
    slice::register(r);
    split::register(r);
    tile::register(r);
    transpose::register(r);
    trilu::register(r);
}
