//! Which observer calibrates a tensor config: a closed set, so a config, a setting file or a
//! command-line flag can only name one that exists (an unknown name is refused with the list).

use serde::{Deserialize, Serialize};

/// The observer that calibrates a config (`observer` in configs, settings and `quant.json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObserverKind {
    /// The observed minimum and maximum.
    #[default]
    Minmax,
    /// A percentile of the values (outliers clipped).
    Percentile,
    /// The range minimising the KL divergence of the histogram (TensorRT's entropy calibration).
    Kl,
    /// The range minimising the mean squared quantization error.
    Mse,
    /// The range that keeps the argmax of the class axis (classifier outputs).
    Isotone,
    /// A fixed range given in the setting.
    Constant,
    /// Scales of floating-point (FP8) formats.
    Floating,
    /// A histogram-based range search (PPQ's `hist`).
    Hist,
    /// Not observed: derived from other configs (biases: `s_in · s_w`).
    Passive,
    /// Block-wise weights only: HQQ's refined float zero points (`mppq_quant::blockwise::hqq`).
    Hqq,
}

impl ObserverKind {
    /// The observers that calibrate activations and weights from data (every kind but `passive`
    /// and the block-wise `hqq`).
    pub const CALIBRATING: [ObserverKind; 8] = [
        Self::Minmax,
        Self::Percentile,
        Self::Kl,
        Self::Mse,
        Self::Isotone,
        Self::Constant,
        Self::Floating,
        Self::Hist,
    ];

    /// The name used in settings, configs and messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Minmax => "minmax",
            Self::Percentile => "percentile",
            Self::Kl => "kl",
            Self::Mse => "mse",
            Self::Isotone => "isotone",
            Self::Constant => "constant",
            Self::Floating => "floating",
            Self::Hist => "hist",
            Self::Passive => "passive",
            Self::Hqq => "hqq",
        }
    }
}

impl std::fmt::Display for ObserverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ObserverKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::CALIBRATING.into_iter().chain([Self::Passive, Self::Hqq]).find(|k| k.name() == s).ok_or_else(|| {
            let known: Vec<_> = Self::CALIBRATING.iter().map(|k| k.name()).collect();
            format!("unknown observer `{s}` (known: {})", known.join(", "))
        })
    }
}
