//! Shape, layout and indexing operators (reshape, slicing, gathering, scattering, padding).

use crate::registry::OpRegistry;

pub fn register(_r: &mut OpRegistry) {}
