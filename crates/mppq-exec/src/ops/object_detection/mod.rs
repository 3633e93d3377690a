//! Object detection (ONNX's `object_detection` operators): NonMaxSuppression and RoiAlign.

use crate::registry::OpRegistry;

mod nms;
mod roi_align;

pub fn register(r: &mut OpRegistry) {
    nms::register(r);
    roi_align::register(r);
}
