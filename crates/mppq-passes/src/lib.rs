//! Optimisation passes of mppq (being built): one pass per module, each asking a small
//! interface (run a sub-graph, read/write parameters, collect statistics) of the executor:
//! quantize fusion, parameter quantization, alignment, baking, equalization, bias correction,
//! LSQ and AdaRound.
