//! `dump-stats`: statistics as a product: categories, precision policy, parallel host engine, byte-exact statistic.csv rows.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(missing_docs)]
