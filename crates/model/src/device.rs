//! Which GPU, and what it is: the selector users type and the description
//! recorded with every GPU result. A leaf module: evaluation results carry a
//! [`DeviceInfo`] without depending on the GPU backend that fills it in.

use serde::{Deserialize, Serialize};

/// Which GPU: an ordinal (`0`) or a UUID as nvidia-smi prints it
/// (`GPU-8c3f...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSelector {
    Ordinal(usize),
    Uuid(String),
}

impl std::str::FromStr for DeviceSelector {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(n) = s.parse() {
            return Ok(DeviceSelector::Ordinal(n));
        }
        if s.len() > 4 && s[..4].eq_ignore_ascii_case("GPU-") {
            return Ok(DeviceSelector::Uuid(s.to_string()));
        }
        Err(format!(
            "expected a device ordinal (0) or a UUID (GPU-...), not {s:?}"
        ))
    }
}

impl std::fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSelector::Ordinal(n) => write!(f, "{n}"),
            DeviceSelector::Uuid(u) => f.write_str(u),
        }
    }
}

/// The GPU a result was measured on; recorded with every GPU result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub uuid: String,
    pub name: String,
    pub compute_capability: (u32, u32),
    /// The CUDA version the driver supports, `13.0`.
    pub driver_version: String,
    pub l2_bytes: u64,
}

impl DeviceInfo {
    /// The PTX target matching the device: `sm_90` for 9.0.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }

    /// What GPU fitness is valid for (the cache's scope): the model, its
    /// compute capability and the driver, not the particular card.
    pub fn target(&self) -> String {
        format!(
            "{} {} driver {}",
            self.name,
            self.arch(),
            self.driver_version
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_and_targets() {
        for (text, expected) in [
            ("0", Ok(DeviceSelector::Ordinal(0))),
            ("3", Ok(DeviceSelector::Ordinal(3))),
            (
                "GPU-8c3f0a2e-1b2c-3d4e-5f60-718293a4b5c6",
                Ok(DeviceSelector::Uuid(
                    "GPU-8c3f0a2e-1b2c-3d4e-5f60-718293a4b5c6".into(),
                )),
            ),
            ("gpu", Err(())),
            ("-1", Err(())),
        ] {
            assert_eq!(text.parse::<DeviceSelector>().map_err(|_| ()), expected);
        }
        let d = DeviceInfo {
            ordinal: 0,
            uuid: "GPU-abababab-abab-abab-abab-abababababab".into(),
            name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            driver_version: "13.0".into(),
            l2_bytes: 50 << 20,
        };
        assert_eq!(d.arch(), "sm_90");
        assert_eq!(d.target(), "NVIDIA H200 sm_90 driver 13.0");
    }
}
