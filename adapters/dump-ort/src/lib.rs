//! `dump-ort`: opdump for ONNX Runtime.
#![deny(missing_docs)]
