//! Configuration passes: each operation's precision ([`dispatch`]), the platform quantizer's
//! initial configs ([`init_quantization`]), the wider weights of the network's edges
//! ([`edge_layers`]), per-tensor weights for models held below opset 13
//! ([`per_tensor_below_opset13`]) and the placement for transformer blocks
//! ([`transformer_blocks`]).

pub mod dispatch;
pub mod edge_layers;
pub mod init_quantization;
pub mod per_tensor_below_opset13;
pub mod transformer_blocks;
