//! The model as a user hands it over: what it holds ([`info`]), the opset it is quantized at
//! ([`upgrade`]: models older than opset 13 are converted) and running it on NumPy data
//! ([`run`]).

pub mod info;
pub mod run;
pub mod upgrade;
