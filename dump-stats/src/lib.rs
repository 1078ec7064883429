//! `dump-stats`: statistics as a product, on top of `dump-core`'s kernels.
//!
//! - [`category`]: MindSpore 2.10's 15 `statistic_category` names, their column titles and
//!   [`CategorySet`], the ordered, de-duplicated selection (no allocation).
//! - [`precision`]: the `high`/`low` precision policy of device statistics, modelled on the
//!   host ([`device_statistics`]) so that device backends can be tested against it.
//! - [`csv`]: `statistic.csv` header and rows, byte-identical to MindSpore (host and device
//!   value rules), into any `core::fmt::Write` or a byte slice.
//! - [`engine`] (feature `std`): the parallel host engine: statistics plus MD5/SHA-1 of a tensor
//!   in one pass over memory, big tensors split across threads, batches of tensors over all
//!   cores, results independent of the thread count.
//! - [`stream`] (feature `alloc`): [`StreamStats`], statistics plus MD5/SHA-1 over chunks of any
//!   length, bit-identical to the one-shot result (the engine and the Dumper's streamed device
//!   tensors both use it).
//! - [`identity`]: [`TensorId`], which tensor of which kernel launch, the one identity every
//!   file name, row and record carries; [`names`] (feature `alloc`): MindSpore's tensor file
//!   names ([`names::TensorFileName`]), the one codec the writer renders and every reader
//!   parses.
//! - [`device`] (feature `std`): [`DeviceTensor`], the contract every device backend implements.
//!
//! Without `std` the crate is `no_std` and allocation-free (`alloc` adds owned rows).
//!
//! ```
//! use dump_core::{DType, stats::summarize};
//! use dump_stats::{CategorySet, Io, TensorId, TensorStats, csv::{RowMeta, header_string, row_string}};
//!
//! let cats = CategorySet::parse(["max", "min", "l2norm"])?;
//! let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
//!     .iter()
//!     .flat_map(|v| v.to_le_bytes())
//!     .collect();
//! let stats = TensorStats {
//!     summary: summarize(DType::Float32, &data, 6)?,
//!     ..TensorStats::default()
//! };
//! let meta = RowMeta {
//!     id: TensorId {
//!         op_type: "Add",
//!         op_name: "Default_Add-op0",
//!         task_id: 0,
//!         stream_id: 0,
//!         timestamp: 1795332154537630,
//!         io: Io::Input,
//!         slot: 0,
//!     },
//!     data_size: 24,
//!     dtype: DType::Float32,
//!     shape: &[2, 3],
//! };
//! assert_eq!(
//!     header_string(&cats),
//!     "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,\
//!      Max Value,Min Value,L2Norm Value\n"
//! );
//! assert_eq!(
//!     row_string(&meta, &cats, &stats)?.unwrap(),
//!     "Add,Default_Add-op0,0,0,1795332154537630,input,0,24,float32,\"(2,3)\",6,1,9.53939,\n"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod category;
pub mod csv;
#[cfg(feature = "std")]
pub mod device;
#[cfg(feature = "std")]
pub mod engine;
pub mod error;
pub mod identity;
#[cfg(feature = "alloc")]
pub mod names;
pub mod precision;
#[cfg(feature = "alloc")]
pub mod stream;
pub mod tensor_stats;

pub use category::{Category, CategorySet, UnknownCategory};
#[cfg(feature = "std")]
pub use device::{
    DeviceError, DeviceStatistics, DeviceTensor, Layout, PendingCopy, PendingStatistics, StatsKind,
    StatsRequest,
};
pub use error::Error;
pub use identity::{Io, IoSlot, TensorId};
pub use precision::{DeviceStats, DeviceValue, Precision, device_statistics};
#[cfg(feature = "alloc")]
pub use stream::StreamStats;
pub use tensor_stats::{Hashes, TensorStats};
