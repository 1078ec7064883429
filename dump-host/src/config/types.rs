//! The small enums of a dump config, with their MindSpore numbers and spellings.

use core::fmt;
use core::str::FromStr;

/// The device (MindSpore `device_target`) a config is checked for. Some rules depend on it:
/// `dump_mode` 2, sampling needs Ascend, device statistics a GPU or Ascend; `support_device` is ignored on CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host CPU (the default).
    #[default]
    Cpu,
    /// GPU.
    Gpu,
    /// Ascend NPU.
    Ascend,
}

impl Device {
    /// MindSpore's spelling: `CPU`, `GPU`, `Ascend`.
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Cpu => "CPU",
            Device::Gpu => "GPU",
            Device::Ascend => "Ascend",
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A device name other than `cpu`, `gpu` or `ascend` (holds the name given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownDevice(pub String);

impl fmt::Display for UnknownDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown device {:?}; allowed: cpu, gpu, ascend (case-insensitive)",
            self.0
        )
    }
}

impl std::error::Error for UnknownDevice {}

impl FromStr for Device {
    type Err = UnknownDevice;

    /// `cpu`, `gpu` or `ascend`, case-insensitive.
    fn from_str(s: &str) -> Result<Self, UnknownDevice> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(Device::Cpu),
            "gpu" => Ok(Device::Gpu),
            "ascend" => Ok(Device::Ascend),
            _ => Err(UnknownDevice(s.to_owned())),
        }
    }
}

/// `common_dump_settings.dump_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DumpMode {
    /// 0: every kernel.
    All,
    /// 1: the kernels listed in `kernels`.
    Kernels,
    /// 2: kernels marked with `mindspore.set_dump` (Ascend only).
    SetDump,
}

impl DumpMode {
    /// The JSON number.
    pub fn as_u32(self) -> u32 {
        match self {
            DumpMode::All => 0,
            DumpMode::Kernels => 1,
            DumpMode::SetDump => 2,
        }
    }
}

/// `common_dump_settings.input_output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputOutput {
    /// 0: inputs and outputs.
    Both,
    /// 1: inputs only.
    Inputs,
    /// 2: outputs only.
    Outputs,
}

impl InputOutput {
    /// The JSON number.
    pub fn as_u32(self) -> u32 {
        match self {
            InputOutput::Both => 0,
            InputOutput::Inputs => 1,
            InputOutput::Outputs => 2,
        }
    }

    /// Whether inputs are dumped.
    pub fn inputs(self) -> bool {
        self != InputOutput::Outputs
    }

    /// Whether outputs are dumped.
    pub fn outputs(self) -> bool {
        self != InputOutput::Inputs
    }
}

/// `common_dump_settings.op_debug_mode` after MindSpore's coercion (1 and 2 become 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpDebugMode {
    /// 0: normal dump.
    Off,
    /// 3: dump only kernels whose outputs overflow.
    Overflow,
    /// 4: exception dump (inputs of a failing kernel).
    Exception,
}

impl OpDebugMode {
    /// The JSON number.
    pub fn as_u32(self) -> u32 {
        match self {
            OpDebugMode::Off => 0,
            OpDebugMode::Overflow => 3,
            OpDebugMode::Exception => 4,
        }
    }
}

/// `common_dump_settings.saved_data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SavedData {
    /// `tensor`: `.npy` files only.
    Tensor,
    /// `statistic`: `statistic.csv` only.
    Statistic,
    /// `full`: both.
    Full,
}

impl SavedData {
    /// The JSON string.
    pub fn as_str(self) -> &'static str {
        match self {
            SavedData::Tensor => "tensor",
            SavedData::Statistic => "statistic",
            SavedData::Full => "full",
        }
    }

    /// Whether tensors are written as `.npy`.
    pub fn tensors(self) -> bool {
        self != SavedData::Statistic
    }

    /// Whether `statistic.csv` is written.
    pub fn statistics(self) -> bool {
        self != SavedData::Tensor
    }
}

/// `e2e_dump_settings.stat_calc_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatCalcMode {
    /// Statistics computed on the host (default).
    Host,
    /// Statistics computed on the device (Ascend, saved_data `statistic`).
    Device,
}

impl StatCalcMode {
    /// The JSON string.
    pub fn as_str(self) -> &'static str {
        match self {
            StatCalcMode::Host => "host",
            StatCalcMode::Device => "device",
        }
    }
}

/// `e2e_dump_settings.device_stat_precision_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrecisionMode {
    /// `high` (default): avg and l2norm in float32.
    High,
    /// `low`: avg and l2norm in the input dtype.
    Low,
}

impl PrecisionMode {
    /// The JSON string.
    pub fn as_str(self) -> &'static str {
        match self {
            PrecisionMode::High => "high",
            PrecisionMode::Low => "low",
        }
    }
}

/// `common_dump_settings.file_format` (Ascend without `e2e_dump_settings` only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileFormat {
    /// `bin` (default).
    Bin,
    /// `npy`.
    Npy,
}

impl FileFormat {
    /// The JSON string.
    pub fn as_str(self) -> &'static str {
        match self {
            FileFormat::Bin => "bin",
            FileFormat::Npy => "npy",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_parsing_and_spelling() {
        assert_eq!("CPU".parse::<Device>(), Ok(Device::Cpu));
        assert_eq!("gpu".parse::<Device>(), Ok(Device::Gpu));
        assert_eq!("Ascend".parse::<Device>(), Ok(Device::Ascend));
        let err = "npu".parse::<Device>().unwrap_err().to_string();
        assert!(
            err.contains("\"npu\"") && err.contains("cpu, gpu, ascend"),
            "{err}"
        );
        assert_eq!(Device::default().to_string(), "CPU");
        assert_eq!(Device::Ascend.to_string(), "Ascend");
    }

    #[test]
    fn numbers_and_flags() {
        assert_eq!(DumpMode::SetDump.as_u32(), 2);
        assert_eq!(OpDebugMode::Exception.as_u32(), 4);
        assert!(InputOutput::Both.inputs() && InputOutput::Both.outputs());
        assert!(!InputOutput::Inputs.outputs() && !InputOutput::Outputs.inputs());
        assert!(SavedData::Full.tensors() && SavedData::Full.statistics());
        assert!(!SavedData::Tensor.statistics() && !SavedData::Statistic.tensors());
    }
}
