//! Configuration passes: each operation's precision ([`dispatch`]), the platform quantizer's
//! initial configs ([`init_quantization`]) and the wider weights of the network's edges
//! ([`edge_layers`]).

pub mod dispatch;
pub mod edge_layers;
pub mod init_quantization;
