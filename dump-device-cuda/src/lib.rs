//! `dump-device-cuda`: NVIDIA GPU support for opdump.
#![deny(missing_docs)]
