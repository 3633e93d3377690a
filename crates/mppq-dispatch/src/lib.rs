//! Dispatchers of mppq (being built): decide for every operation whether it runs quantized,
//! in float, or as shape-or-index arithmetic (`allin`, `aggressive`, `conservative`,
//! `pointwise`, `perseus`, and user-defined ones), and say which rule decided.
