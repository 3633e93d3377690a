//! Quantization core of mppq (being built): quantizers that give each quantable operation its
//! configs, calibration observers (minmax, percentile, kl, mse, isotone, floating), and the
//! platform registry that bundles dispatchers, quantizers, parsers and exporters.
