//! Shape, layout and indexing operators (reshape, slicing, gathering, scattering, padding).

use crate::registry::OpRegistry;

mod concat;
mod expand;
mod gather;
mod gather_elements;
mod gather_nd;
mod reshape;
mod scatter_elements;
mod scatter_nd;
mod slice;
mod split;
mod tile;
mod transpose;
mod util;

pub fn register(r: &mut OpRegistry) {
    concat::register(r);
    expand::register(r);
    gather::register(r);
    gather_elements::register(r);
    gather_nd::register(r);
    reshape::register(r);
    scatter_elements::register(r);
    scatter_nd::register(r);
    slice::register(r);
    split::register(r);
    tile::register(r);
    transpose::register(r);
}
