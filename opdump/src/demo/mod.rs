//! The demo workload of `opdump demo`: a LeNet-5 trained for real on deterministic synthetic
//! data, with kernels named like MindSpore's, reported through a [`Tracer`].

mod lenet;
mod ops;

pub use lenet::{LeNet, NoTrace, Tracer, View};
