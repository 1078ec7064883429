//! The fuzzed entry points and their invariants, shared by the cargo-fuzz targets
//! (`fuzz_targets/*.rs`) and the corpus replay test (`tests/tests/fuzz_corpus.rs`), which runs
//! every file of `fuzz/corpus/<target>/` through the same function in a normal `cargo test`.
//!
//! Each function takes arbitrary bytes and panics when an invariant breaks; returning means
//! the input was handled (accepted or cleanly rejected).
#![allow(dead_code)]

use std::collections::HashMap;

use dump_core::DType;
use dump_core::wire::{
    Decoder, Event, Frame, Kind, MAX_COBS_LEN, MAX_ENCODED_LEN, StatRecord, StatView,
};
use dump_host::config::{ConfigDialect, Device, DumpConfig, MsprobeConfig, ParseOptions};
use dump_host::layout::{TensorFileName, sanitize};
use dump_host::{DumpOptions, DumpPlan, Error};
use dump_stats::csv::{Io, RowMeta, header_string, row_string, write_row_to_slice};
use dump_stats::{Category, CategorySet, TensorStats};

/// One fuzzed entry point: takes arbitrary bytes, panics when an invariant breaks.
pub type Check = fn(&[u8]);

/// Every target by name, for the replay test.
pub const TARGETS: [(&str, Check); 7] = [
    ("config_json", config_json),
    ("msprobe_config", msprobe_config),
    ("npy", npy),
    ("file_name", file_name),
    ("csv_row", csv_row),
    ("wire", wire),
    ("stream_dialect", stream_dialect),
];

/// `data_dump.json`: for each device, the config reader and the plan (the path `opdump check`
/// and the Dumper share) agree; an accepted config has no error, its effective JSON parses to
/// the same config; a rejected one says why.
pub fn config_json(data: &[u8]) {
    match ConfigDialect::detect(data) {
        // The Dumper reads it with msprobe's rules (the msprobe_config target checks them).
        ConfigDialect::Msprobe => return msprobe_config(data),
        d @ (ConfigDialect::AclJson | ConfigDialect::Torchair) => return cann_config(data, d),
        ConfigDialect::MindSpore => {}
    }
    let env: HashMap<String, String> = [
        ("MS_DIAGNOSTIC_DATA_PATH".to_owned(), "/tmp/fuzz".to_owned()),
        ("RANK_ID".to_owned(), "1".to_owned()),
    ]
    .into();
    for device in [Device::Cpu, Device::Gpu, Device::Ascend] {
        let popts = ParseOptions::new(device, &env);
        let opts = DumpOptions {
            device,
            ..DumpOptions::default()
        };
        let validated = DumpConfig::from_json_bytes(data, &popts);
        let planned = DumpPlan::from_json(data.to_vec(), &env, &opts);
        match (&validated, &planned) {
            (Ok(v), Ok(p)) => {
                assert!(
                    !v.warnings.has_errors(),
                    "accepted with errors: {}",
                    v.warnings
                );
                assert_eq!(p.config, v.config, "plan and check see different configs");
                assert_eq!(p.plan.net, v.config.net_name);
                let eff = v.config.to_effective_json().to_string();
                let mut again = DumpConfig::from_json_str(&eff, &popts)
                    .unwrap_or_else(|e| panic!("effective config rejected: {e}\n{eff}"))
                    .config;
                // `present` records whether the input had the section; the effective config
                // always writes it where e2e dump is in force (e2e_enabled is compared).
                again.e2e.present = v.config.e2e.present;
                assert_eq!(again, v.config, "effective config differs: {eff}");
            }
            (Err(Error::Config(d)), Err(Error::Config(_))) => {
                assert!(d.has_errors(), "rejected without an error: {d}");
            }
            (v, p) => panic!("check and Dumper disagree on {device}: {v:?} vs {p:?}"),
        }
    }
}

/// CANN's `acl.json` and torchair's `dump_config`: the checks never panic, a rejected config
/// says why (acl.json's errors each carry CANN's `EP000x` code), and the Dumper's plan agrees:
/// a config the check rejects the plan rejects too; a config the plan accepts writes CANN's GE
/// layout below its `dump_path` (torchair's under `worldsize1_global_rank0`).
pub fn cann_config(data: &[u8], dialect: ConfigDialect) {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let checked = match dialect {
        ConfigDialect::AclJson => dump_host::config::acl::check_acl(&doc).map(|a| a.warnings),
        _ => dump_host::config::torchair::check_torchair(&doc).map(|t| t.warnings),
    };
    let accepted = match checked {
        Ok(w) => {
            assert!(!w.has_errors(), "accepted with errors: {w}");
            true
        }
        Err(d) => {
            assert!(d.has_errors(), "rejected without an error: {d}");
            if dialect == ConfigDialect::AclJson {
                for e in d.errors() {
                    assert!(e.message.starts_with("EP000"), "no CANN code: {e}");
                }
            }
            false
        }
    };
    let env: HashMap<String, String> = HashMap::new();
    match DumpPlan::from_json(data.to_vec(), &env, &DumpOptions::default()) {
        Ok(p) => {
            assert!(
                accepted,
                "the Dumper ran from a {} its check rejects",
                dialect.describe()
            );
            let g = p
                .plan
                .ge
                .as_ref()
                .expect("a CANN config plans the GE layout");
            assert_eq!(p.plan.root, g.base);
            let path = match dialect {
                ConfigDialect::AclJson => doc.pointer("/dump/dump_path"),
                _ => doc.get("dump_path"),
            }
            .and_then(serde_json::Value::as_str)
            .unwrap_or("./");
            // torchair's dump_config_path may move it to the acl.json's dump_path.
            if doc.get("dump_config_path").is_none() {
                assert!(
                    g.base.starts_with(path),
                    "{} not below {path}",
                    g.base.display()
                );
            }
        }
        Err(Error::Config(d)) => assert!(d.has_errors(), "rejected without an error: {d}"),
        Err(_) => {}
    }
}

/// msprobe's `config.json`: the reader never panics; an accepted config has no error, its
/// effective JSON parses to the same config, and the Dumper's plan agrees (same root, steps,
/// msprobe settings); a rejected one says why, and the plan rejects it too.
pub fn msprobe_config(data: &[u8]) {
    let env: HashMap<String, String> = HashMap::new();
    let text = String::from_utf8_lossy(data);
    let validated = MsprobeConfig::from_json_str(&text);
    if let Ok(v) = &validated {
        assert!(
            !v.warnings.has_errors(),
            "accepted with errors: {}",
            v.warnings
        );
        let eff = v.config.to_effective_json().to_string();
        let again = MsprobeConfig::from_json_str(&eff)
            .unwrap_or_else(|e| panic!("effective config rejected: {e}\n{eff}"));
        assert_eq!(again.config, v.config, "effective config differs: {eff}");
    }
    if let Err(e) = &validated {
        let Error::Config(d) = e else {
            panic!("not a config error: {e}")
        };
        assert!(d.has_errors(), "rejected without an error: {d}");
    }
    if std::str::from_utf8(data).is_err() || ConfigDialect::detect(data) != ConfigDialect::Msprobe {
        return;
    }
    let planned = DumpPlan::from_json(data.to_vec(), &env, &DumpOptions::default());
    match (&validated, &planned) {
        (Ok(v), Ok(p)) => {
            assert_eq!(p.plan.msprobe.as_ref(), Some(&v.config));
            assert_eq!(p.plan.root.to_string_lossy(), v.config.dump_path);
            assert_eq!(p.plan.iteration, v.config.iteration());
        }
        (Err(_), Err(Error::Config(_))) => {}
        (v, p) => panic!("check and Dumper disagree: {v:?} vs {p:?}"),
    }
}

/// `.npy` bytes: the in-memory reader and the streaming file reader agree (both reject, or both
/// give the same dtype, shape and data); an accepted header re-encodes (version 1/2, C order)
/// to a header that parses the same.
pub fn npy(data: &[u8]) {
    let whole = dump_npy::read_npy(data);
    let streamed = dump_npy::read_from(&mut &data[..], data.len() as u64);
    match (&whole, &streamed) {
        (Ok((h, payload)), Ok(f)) => {
            assert_eq!(h.descr(), f.descr);
            assert_eq!(h.dtype(), f.dtype);
            assert_eq!(h.fortran_order(), f.fortran_order);
            assert_eq!(h.dims().collect::<Vec<_>>(), f.shape);
            assert_eq!(*payload, &f.data[..]);
            assert_eq!(h.data_offset(), f.data_offset);
            assert_eq!(h.data_offset() + h.data_len(), data.len());
            assert_eq!(h.elems(), f.shape.iter().product::<usize>());
            if !h.fortran_order()
                && let Ok(len) = dump_npy::header_len(h.descr(), &f.shape)
            {
                let mut buf = vec![0u8; len];
                let n = dump_npy::encode_header(h.descr(), &f.shape, &mut buf)
                    .expect("header_len said it fits");
                let again = dump_npy::parse_header(&buf[..n]).expect("own header parses");
                assert_eq!(again.descr(), h.descr());
                assert_eq!(again.dims().collect::<Vec<_>>(), f.shape);
                assert_eq!(again.data_offset(), n);
            }
        }
        (Err(_), Err(_)) => {}
        (w, s) => panic!(
            "read_npy and read_from disagree: {:?} vs {:?}",
            w.as_ref().map(|(h, _)| h.descr()),
            s.as_ref().map(|f| f.descr.clone())
        ),
    }
    // The header parser alone never panics either; the opaque one (ml_dtypes' descrs)
    // accepts everything the plain one does, the same way, and more only for those descrs.
    let plain = dump_npy::parse_header(data);
    match (plain, dump_npy::parse_header_opaque(data)) {
        (Ok(p), Ok(o)) => assert_eq!(p, o),
        (Err(_), Ok(o)) => assert!(
            dump_npy::opaque_carrier(o.descr()) == Some(o.dtype()),
            "opaque accepted {:?}",
            o.descr()
        ),
        (Ok(p), Err(e)) => panic!("opaque refused {:?}: {e}", p.descr()),
        (Err(_), Err(_)) => {}
    }
}

/// File names: a parsed name whose text fields are already sanitised renders (in the spelling
/// it used) to a name that parses to the same fields; canonical names come back byte for byte.
pub fn file_name(data: &[u8]) {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    let Some(p) = TensorFileName::parse(name) else {
        return;
    };
    let fixed = |s: &str| sanitize(s) == s;
    if !(fixed(p.id.op_type) && fixed(p.id.op_name) && fixed(p.format)) {
        return;
    }
    let rendered = p.render();
    let again = TensorFileName::parse(&rendered)
        .unwrap_or_else(|| panic!("rendered name does not parse: {rendered:?} (from {name:?})"));
    assert_eq!(again, p, "{name:?} -> {rendered:?}");
    // Canonical names (no leading zeros, the dtype as spelled) come back byte for byte.
    let canonical = |n: u64, text: &str| n.to_string() == text;
    let f: Vec<&str> = name.trim_end_matches(".npy").split('.').collect();
    let dtype_text = f.last().copied().unwrap_or("");
    if canonical(p.id.task_id.into(), f[2])
        && canonical(p.id.stream_id.into(), f[3])
        && canonical(p.id.timestamp, f[4])
        && canonical(p.id.slot.into(), f[6])
        && p.spelling.spell(p.dtype) == dtype_text
    {
        assert_eq!(rendered, name);
    }
}

/// Reads little-endian values from the fuzz input, zeros when it runs out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        let t = self.take(8);
        b[..t.len()].copy_from_slice(t);
        u64::from_le_bytes(b)
    }
    fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }
}

/// Splits a row of `statistic.csv` as a csv reader does (fields separated by `,`, a field in
/// double quotes may hold commas).
fn split_row(row: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    for c in row.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            c => fields.last_mut().expect("one field").push(c),
        }
    }
    fields
}

/// `statistic.csv` rows: a row formatted from fuzzed metadata and statistics parses back (as a
/// csv reader splits it) to the same fields, with the statistics within `%g`'s 6 significant
/// digits; the slice writer gives the same bytes and the exact size it needs.
pub fn csv_row(data: &[u8]) {
    let mut b = Bytes(data);
    let mask = b.u64();
    let names: Vec<&str> = Category::ALL
        .iter()
        .enumerate()
        .filter(|(i, _)| mask >> i & 1 == 1)
        .map(|(_, c)| c.name())
        .collect();
    let Ok(cats) = CategorySet::parse(names.iter().copied()) else {
        return;
    };
    let text_len = usize::from(b.u8() % 24);
    // Callers write sanitised names without `,`, `"` and line breaks (the Dumper replaces
    // them); the row format promises nothing for others.
    let clean = |raw: &[u8]| -> String {
        String::from_utf8_lossy(raw)
            .chars()
            .map(|c| {
                if matches!(c, ',' | '"' | '\n' | '\r') {
                    '_'
                } else {
                    c
                }
            })
            .collect()
    };
    let op_type = clean(b.take(text_len));
    let op_name = sanitize(&clean(b.take(text_len)));
    // The identity's ids are u32 (the same input bytes are consumed as when they were u64).
    let (task_id, stream_id, timestamp, slot, data_size) = (
        b.u64() as u32,
        b.u64() as u32,
        b.u64(),
        b.u64() as u32,
        b.u64(),
    );
    let io = if b.u8() & 1 == 0 {
        Io::Input
    } else {
        Io::Output
    };
    let rank = usize::from(b.u8() % 5);
    let shape: Vec<usize> = (0..rank).map(|_| b.u64() as usize).collect();
    let dtype = DType::ALL[usize::from(b.u8()) % DType::ALL.len()];
    let mut summary = dump_core::Summary::EMPTY;
    for _ in 0..(1 + b.u8() % 8) {
        summary.push(f64::from_bits(b.u64()));
    }
    let mut md5 = [0u8; 16];
    md5.copy_from_slice(&{
        let mut m = [0u8; 16];
        let t = b.take(16);
        m[..t.len()].copy_from_slice(t);
        m
    });
    let stats = TensorStats {
        summary: Some(summary),
        md5: Some(md5),
        sha1: Some([7u8; 20]),
    };
    let meta = RowMeta {
        id: dump_stats::TensorId {
            op_type: &op_type,
            op_name: &op_name,
            task_id,
            stream_id,
            timestamp,
            io,
            slot,
        },
        data_size,
        dtype,
        shape: &shape,
    };
    let row = row_string(&meta, &cats, &stats)
        .expect("digests are given")
        .expect("a non-empty summary gives a row");
    assert!(row.ends_with(",\n"), "{row:?}");
    assert_eq!(row.matches('\n').count(), 1, "{row:?}");
    let mut buf = vec![0u8; row.len()];
    assert_eq!(
        write_row_to_slice(&mut buf, &meta, &cats, &stats).unwrap(),
        Some(row.len())
    );
    assert_eq!(buf, row.as_bytes());
    if !row.is_empty() {
        let mut short = vec![0u8; row.len() - 1];
        match write_row_to_slice(&mut short, &meta, &cats, &stats) {
            Err(dump_stats::Error::BufferTooSmall { needed, .. }) => assert_eq!(needed, row.len()),
            other => panic!("a short buffer gave {other:?}"),
        }
    }
    let header = header_string(&cats);
    let fields = split_row(row.trim_end_matches('\n'));
    assert_eq!(
        fields.len(),
        split_row(header.trim_end()).len() + 1,
        "{row:?}"
    );
    assert_eq!(
        fields.last().map(String::as_str),
        Some(""),
        "trailing comma"
    );
    assert_eq!(fields[0], op_type);
    assert_eq!(fields[1], op_name);
    let n = |i: usize| {
        fields[i]
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("field {i}: {row:?}"))
    };
    assert_eq!(
        [n(2), n(3), n(4), n(6), n(7)],
        [
            u64::from(task_id),
            u64::from(stream_id),
            timestamp,
            u64::from(slot),
            data_size
        ]
    );
    assert_eq!(fields[5], io.as_str());
    assert_eq!(fields[8], dtype.name());
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    assert_eq!(fields[9], format!("({})", dims.join(",")));
    for (c, text) in cats.iter().zip(&fields[10..]) {
        let want = match c {
            Category::Max => summary.max_value(),
            Category::Min => summary.min_value(),
            Category::Avg => summary.avg(),
            Category::L2Norm => summary.l2norm(),
            Category::Count => summary.count as f64,
            Category::NegativeZeroCount => summary.neg as f64,
            Category::PositiveZeroCount => summary.pos as f64,
            Category::NanCount => summary.nan as f64,
            Category::NegativeInfCount => summary.neg_inf as f64,
            Category::PositiveInfCount => summary.pos_inf as f64,
            Category::ZeroCount => summary.zero as f64,
            Category::Md5 => {
                assert_eq!(*text, dump_core::hash::hex(&md5).as_str());
                continue;
            }
            Category::Sha1 => {
                assert_eq!(*text, "07".repeat(20));
                continue;
            }
        };
        let got: f64 = text
            .trim_start_matches('-')
            .parse::<f64>()
            .map(|v| if text.starts_with('-') { -v } else { v })
            .unwrap_or_else(|_| panic!("{c:?} value {text:?} is not a number: {row:?}"));
        if want.is_nan() {
            assert!(got.is_nan(), "{c:?}: {text:?} for NaN");
        } else if want.is_infinite() {
            assert_eq!(got, want, "{c:?}");
        } else {
            let tol = want.abs() * 5e-6 + f64::MIN_POSITIVE;
            assert!((got - want).abs() <= tol, "{c:?}: {text:?} for {want:e}");
        }
    }
}

/// Postcard wire records: decoding arbitrary bytes never panics; a decoded record re-encodes
/// within the documented bounds and decodes again to the same bytes (bare and COBS). The same
/// bytes as an agent stream: see [`wire_stream`].
pub fn wire(data: &[u8]) {
    wire_stream(data);
    // The host's hand-written stat decoder accepts and refuses exactly what postcard does
    // (Debug text: a decoded record may hold NaNs).
    let by_hand = StatView::decode(data).map(|v| Frame::Stat(v.to_record()));
    let by_postcard = Frame::decode(Kind::Stat, data);
    assert_eq!(format!("{by_hand:?}"), format!("{by_postcard:?}"));
    let mut frame = data.to_vec();
    let _ = StatRecord::decode_cobs(&mut frame);
    let Ok(rec) = StatRecord::decode(data) else {
        return;
    };
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let bytes = rec
        .encode(&mut buf)
        .expect("MAX_ENCODED_LEN suffices")
        .to_vec();
    let again = StatRecord::decode(&bytes).expect("own encoding decodes");
    let mut buf2 = [0u8; MAX_ENCODED_LEN];
    assert_eq!(again.encode(&mut buf2).unwrap(), &bytes[..]);
    let mut cobs = [0u8; MAX_COBS_LEN];
    let mut framed = rec
        .encode_cobs(&mut cobs)
        .expect("MAX_COBS_LEN suffices")
        .to_vec();
    let back = StatRecord::decode_cobs(&mut framed).expect("own frame decodes");
    assert_eq!(back.encode(&mut buf2).unwrap(), &bytes[..]);
}

/// The frame decoder on arbitrary bytes: never panics, and the stream cut into single bytes
/// gives the same events (offsets included) as in one piece.
pub fn wire_stream(data: &[u8]) {
    let run = |piece: usize| {
        let mut events: Vec<Event> = Vec::new();
        let mut d = Decoder::new();
        for chunk in data.chunks(piece.max(1)) {
            d.push(chunk, |e| events.push(e));
        }
        d.finish(|e| events.push(e));
        assert_eq!(d.counts().bytes, data.len() as u64);
        // Debug text: a decoded record may hold NaNs, which `==` would call different.
        format!("{events:?}")
    };
    assert_eq!(run(data.len()), run(1));
}

/// A device agent's saved stream read by dump-read's `stream` dialect (what `opdump inspect` and
/// `opdump compare` do with a stream file): never a panic; an opened stream is the `stream`
/// dialect, every problem names the file, every record has its row statistics and at most
/// `MAX_RANK` dimensions; a refused file is an error naming it.
pub fn stream_dialect(data: &[u8]) {
    let path = std::env::temp_dir().join(format!(
        "opdump-fuzz-stream-{}.opstream",
        std::process::id()
    ));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    match dump_read::Dump::open(&path) {
        Ok(d) => {
            assert_eq!(d.dialect, "stream");
            assert!(d.problems.iter().all(|p| p.path == path));
            for t in &d.tensors {
                assert!(t.shape.len() <= dump_core::wire::MAX_RANK);
                assert!(t.row_stats.is_some());
            }
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains(&path.display().to_string()), "{m}");
        }
    }
    let _ = std::fs::remove_file(&path);
}
