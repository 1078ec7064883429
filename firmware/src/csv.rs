//! `dump-stats` known answers: `statistic.csv` header and rows, byte for byte, written into a
//! `heapless::String` or a stack buffer from statistics computed on the device.
//!
//! The expected text is MindSpore's (`check_statistic_dump`: Add of `[[1,2,3],[4,5,6]]` and
//! `[[7,8,9],[10,11,12]]` reads `6/1/9.53939`, `12/7/23.6432`, `18/8/32.9242`; spec §6 and §7
//! for the layout) with values and digests from python3 (numpy `%g`, hashlib md5/sha1).

use crate::{Tally, f32_bytes, npy::CAST_BF16, u16_bytes};
use cortex_m_semihosting::hprintln;
use dump_core::{
    DType,
    hash::{md5, ms_sha1},
    stats::summarize,
};
use dump_stats::{
    Category, CategorySet, Error, Precision, TensorStats,
    csv::{Io, RowMeta, data_size, write_device_row, write_header, write_row, write_row_to_slice},
    device_statistics,
};
use heapless::String;

/// Statistics (no digests) of `elems` elements of `dtype`; an empty `TensorStats` and a
/// `FAIL` line when the kernel refuses the tensor.
fn tensor_stats(t: &mut Tally, name: &str, dtype: DType, data: &[u8], elems: usize) -> TensorStats {
    match summarize(dtype, data, elems) {
        Ok(summary) => TensorStats {
            summary,
            md5: None,
            sha1: None,
        },
        Err(e) => {
            hprintln!("FAIL {}: summarize: {:?}", name, e);
            t.failed += 1;
            TensorStats::default()
        }
    }
}

/// The first ten fields of a row.
fn meta<'a>(
    op_type: &'a str,
    op_name: &'a str,
    timestamp: u64,
    io: Io,
    slot: u32,
    dtype: DType,
    shape: &'a [usize],
) -> RowMeta<'a> {
    RowMeta {
        id: dump_stats::TensorId {
            op_type,
            op_name,
            task_id: 0,
            stream_id: 0,
            timestamp,
            io,
            slot,
        },
        data_size: data_size(dtype, shape.iter().product()).unwrap_or(u64::MAX),
        dtype,
        shape,
    }
}

/// Runs every dump-stats known answer.
pub fn csv_kat(t: &mut Tally) {
    mindspore_add_example(t);
    every_column(t);
    reference_bf16_row(t);
    device_rows(t);
    no_row_and_errors(t);
}

/// MindSpore's check_statistic_dump: header and three rows with the default categories.
fn mindspore_add_example(t: &mut Tally) {
    let cats = CategorySet::default();
    let mut out: String<512> = String::new();
    t.check(
        "Add example header written",
        write_header(&mut out, &cats).is_ok(),
    );
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let y = [7.0f32, 8.0, 9.0, 10.0, 11.0, 12.0];
    let mut z = [0f32; 6];
    for ((s, a), b) in z.iter_mut().zip(&x).zip(&y) {
        *s = a + b;
    }
    let shape = [2, 3];
    for (io, slot, ts, v) in [
        (Io::Input, 0, 1795332154537630, &x),
        (Io::Input, 1, 1795332154537672, &y),
        (Io::Output, 0, 1795332154537718, &z),
    ] {
        let mut buf = [0u8; 24];
        let st = tensor_stats(t, "Add example", DType::Float32, f32_bytes(v, &mut buf), 6);
        let m = meta(
            "Add",
            "Default_Add-op0",
            ts,
            io,
            slot,
            DType::Float32,
            &shape,
        );
        t.check(
            "Add example row written",
            write_row(&mut out, &m, &cats, &st) == Ok(true),
        );
    }
    t.check_str(
        "MindSpore Add example statistic.csv",
        &out,
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,\
         Max Value,Min Value,L2Norm Value\n\
         Add,Default_Add-op0,0,0,1795332154537630,input,0,24,float32,\"(2,3)\",6,1,9.53939,\n\
         Add,Default_Add-op0,0,0,1795332154537672,input,1,24,float32,\"(2,3)\",12,7,23.6432,\n\
         Add,Default_Add-op0,0,0,1795332154537718,output,0,24,float32,\"(2,3)\",18,8,32.9242,\n",
    );
}

/// All 13 columns in MindSpore's order, with MD5 and SHA-1 computed on the device; signed
/// zeros and an infinity exercise every counter.
fn every_column(t: &mut Tally) {
    let all = CategorySet::all();
    let mut header: String<256> = String::new();
    t.check(
        "all-columns header",
        write_header(&mut header, &all).is_ok(),
    );
    t.check_str(
        "all-columns header",
        &header,
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,\
         Max Value,Min Value,Avg Value,Count,Negative Zero Count,Positive Zero Count,NaN Count,\
         Negative Inf Count,Positive Inf Count,Zero Count,MD5,L2Norm Value,SHA1\n",
    );
    let mut buf = [0u8; 24];
    let data = f32_bytes(&[-0.0, 0.0, f32::INFINITY, -3.0, 1e6, 1e-5], &mut buf);
    let mut st = tensor_stats(t, "all columns", DType::Float32, data, 6);
    st.md5 = Some(md5(data));
    st.sha1 = Some(ms_sha1(DType::Float32, data, 6));
    let shape = [6];
    let m = meta("Add", "n", 7, Io::Output, 2, DType::Float32, &shape);
    let mut row = [0u8; 256];
    match write_row_to_slice(&mut row, &m, &all, &st) {
        Ok(Some(n)) => t.check_bytes(
            "all-columns row",
            &row[..n],
            b"Add,n,0,0,7,output,2,24,float32,\"(6)\",inf,-3,inf,6,1,3,0,0,1,2,\
              5ea7cd47b9d51bd90b3b41d3cb25cafa,inf,65858771a18780c094e6de6768bb4ff8b1b48837,\n",
        ),
        other => {
            hprintln!("FAIL all-columns row: {:?}", other);
            t.failed += 1;
        }
    }
}

/// The reference dump's bf16 tensor (`Cast-op3` input): values widened exactly, md5 of the
/// raw bf16 bytes, Data Size of the bf16 storage.
fn reference_bf16_row(t: &mut Tally) {
    let cats = match CategorySet::parse(["max", "min", "avg", "l2norm", "md5"]) {
        Ok(c) => c,
        Err(e) => {
            hprintln!("FAIL parse categories: {:?}", e);
            t.failed += 1;
            return;
        }
    };
    let mut src = [0u8; 20];
    let data = u16_bytes(&CAST_BF16, &mut src);
    let mut st = tensor_stats(t, "bf16 row", DType::BFloat16, data, 10);
    st.md5 = Some(md5(data));
    let shape = [2, 5];
    let m = meta(
        "Cast",
        "Default_network-WithLossCell__backbone-TinyNet_Cast-op3",
        1795332152780038,
        Io::Input,
        0,
        DType::BFloat16,
        &shape,
    );
    let mut row = [0u8; 256];
    match write_row_to_slice(&mut row, &m, &cats, &st) {
        Ok(Some(n)) => t.check_bytes(
            "bf16 reference row",
            &row[..n],
            b"Cast,Default_network-WithLossCell__backbone-TinyNet_Cast-op3,0,0,1795332152780038,\
              input,0,20,bfloat16,\"(2,5)\",4,1.42969,2.63594,8.8169,\
              7afee21baa0ec7f9bc6f6d1faaaf7ef9,\n",
        ),
        other => {
            hprintln!("FAIL bf16 reference row: {:?}", other);
            t.failed += 1;
        }
    }
}

/// Device rows of fp16 `[40000, 40000, 40000]`: `high` keeps avg and l2norm in float32
/// (l2norm 69282.03), `low` accumulates in fp16 and overflows to `inf` (spec §7).
fn device_rows(t: &mut Tally) {
    let cats = match CategorySet::parse(["max", "min", "avg", "l2norm"]) {
        Ok(c) => c,
        Err(e) => {
            hprintln!("FAIL parse device categories: {:?}", e);
            t.failed += 1;
            return;
        }
    };
    let mut src = [0u8; 6];
    // 0x78e2 is fp16 40000 (exact).
    let data = u16_bytes(&[0x78e2; 3], &mut src);
    let shape = [3];
    let m = meta(
        "Add",
        "Default_Add-op0",
        1,
        Io::Input,
        0,
        DType::Float16,
        &shape,
    );
    for (precision, want) in [
        (
            Precision::High,
            "Add,Default_Add-op0,0,0,1,input,0,6,float16,\"(3)\",40000,40000,40000,69282,\n",
        ),
        (
            Precision::Low,
            "Add,Default_Add-op0,0,0,1,input,0,6,float16,\"(3)\",40000,40000,inf,inf,\n",
        ),
    ] {
        let mut row: String<128> = String::new();
        match device_statistics(DType::Float16, data, 3, precision) {
            Ok(Some(ds)) => {
                t.check(
                    "device row written",
                    write_device_row(&mut row, &m, &cats, &ds).is_ok(),
                );
                t.check_str(precision.name(), &row, want);
            }
            other => {
                hprintln!("FAIL device_statistics {}: {:?}", precision.name(), other);
                t.failed += 1;
            }
        }
    }
    let mut row: String<128> = String::new();
    t.check(
        "device row refuses a count column",
        match device_statistics(DType::Float16, data, 3, Precision::High) {
            Ok(Some(ds)) => {
                write_device_row(&mut row, &m, &CategorySet::all(), &ds)
                    == Err(Error::NotADeviceCategory(Category::Count))
                    && row.is_empty()
            }
            _ => false,
        },
    );
}

/// MindSpore writes no row for an empty tensor; a short buffer or a missing digest is an
/// error, reported before anything is written.
fn no_row_and_errors(t: &mut Tally) {
    let cats = CategorySet::default();
    let empty = [0usize];
    let m = meta("Add", "e", 0, Io::Input, 0, DType::Float32, &empty);
    let mut row = [0u8; 8];
    t.check(
        "empty tensor: no row",
        write_row_to_slice(&mut row, &m, &cats, &TensorStats::default()) == Ok(None),
    );
    let mut buf = [0u8; 8];
    let st = tensor_stats(
        t,
        "short buffer",
        DType::Float32,
        f32_bytes(&[1.0, 2.0], &mut buf),
        2,
    );
    let shape = [2];
    let m = meta(
        "Add",
        "Default_Add-op0",
        5,
        Io::Input,
        0,
        DType::Float32,
        &shape,
    );
    // "Add,Default_Add-op0,0,0,5,input,0,8,float32,\"(2)\",2,1,2.23607,\n" is 63 bytes.
    let mut row = [0u8; 62];
    t.check(
        "row into 62 bytes",
        write_row_to_slice(&mut row, &m, &cats, &st)
            == Err(Error::BufferTooSmall {
                needed: 63,
                available: 62,
            }),
    );
    let mut row: String<128> = String::new();
    t.check(
        "md5 column without a digest",
        match CategorySet::parse(["md5"]) {
            Ok(md5_only) => {
                write_row(&mut row, &m, &md5_only, &st) == Err(Error::MissingHash(Category::Md5))
                    && row.is_empty()
            }
            Err(_) => false,
        },
    );
    t.check(
        "Data Size of packed and widened dtypes",
        data_size(DType::BFloat16, 10) == Some(20)
            && data_size(DType::Int4, 5) == Some(3)
            && data_size(DType::UInt1, 11) == Some(2),
    );
}
