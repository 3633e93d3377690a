//! Tensor operators (ONNX's `tensor`): casts, shape and layout (Reshape, Flatten, Squeeze,
//! Transpose, Concat, Split, Tile, ...), slicing, gathering and scattering, padding, Resize and
//! Upsample, GridSample, AffineGrid, CenterCropPad, Unique, Where, IsNaN/IsInf and Identity.

use crate::registry::OpRegistry;

mod affine_grid;
mod cast;
mod center_crop_pad;
mod compress;
mod concat;
mod depth_space;
mod gather;
mod gather_elements;
mod gather_nd;
mod grid_sample;
mod identity;
mod isnan;
mod nonzero;
mod one_hot;
mod pad;
mod reshape;
mod resize;
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
mod unique;
mod where_op;

pub fn register(r: &mut OpRegistry) {
    affine_grid::register(r);
    cast::register(r);
    center_crop_pad::register(r);
    compress::register(r);
    concat::register(r);
    depth_space::register(r);
    gather::register(r);
    gather_elements::register(r);
    gather_nd::register(r);
    grid_sample::register(r);
    identity::register(r);
    isnan::register(r);
    nonzero::register(r);
    one_hot::register(r);
    pad::register(r);
    reshape::register(r);
    resize::register(r);
    reverse_sequence::register(r);
    scatter_elements::register(r);
    scatter_nd::register(r);
    shape_of::register(r);
    slice::register(r);
    split::register(r);
    tile::register(r);
    transpose::register(r);
    trilu::register(r);
    unique::register(r);
    where_op::register(r);
}
