//! Helpers shared by operators of several families: element-wise operand alignment
//! ([`elementwise`]), axes and constant tensors ([`axes`]), layer attributes and float checks
//! ([`layer`]), indexing primitives and host-side index arithmetic ([`indexing`]), host values in
//! a tensor's dtype ([`host`]) and sequence inputs and sub-graph bodies ([`sequence`]).

pub mod axes;
pub mod elementwise;
pub mod host;
pub mod indexing;
pub mod layer;
pub mod sequence;
