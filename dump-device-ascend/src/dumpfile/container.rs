//! The container (spec §1): variant detection, payload placement, and [`decode`] over a whole
//! file in memory.

use super::error::DumpFileError;
use super::header::{Container, DumpHeader, Limits, TensorMeta};
use super::message::{self, Message};

/// Size of the v2 header: the message length as a `u64`, little-endian.
pub const HEADER_LEN: u64 = 8;

/// `0x5A5A5A5A` at offset 8 marks msaccucmp's "nano" TLV container.
pub const NANO_MAGIC: u32 = 0x5A5A_5A5A;

/// What the first bytes of a file say to try.
pub(super) enum Plan {
    /// The header's length fits: parse the v2 message of `message_len` bytes first.
    Binary { message_len: u64 },
    /// The header's length does not fit: the file can only be inline (v1); `error` is what to
    /// report if it is not.
    InlineOnly { error: DumpFileError },
}

/// Reads the first (up to 12) bytes of a file of `file_len` bytes.
pub(super) fn plan(prefix: &[u8], file_len: u64, limits: &Limits) -> Result<Plan, DumpFileError> {
    if file_len <= HEADER_LEN || prefix.len() < HEADER_LEN as usize {
        return Err(DumpFileError::TooShort { file_len });
    }
    if let Some(m) = prefix.get(8..12)
        && u32::from_le_bytes([m[0], m[1], m[2], m[3]]) == NANO_MAGIC
    {
        return Err(DumpFileError::NanoContainer);
    }
    let mut l = [0u8; 8];
    l.copy_from_slice(&prefix[..8]);
    let declared = u64::from_le_bytes(l);
    let available = file_len - HEADER_LEN;
    Ok(if declared > available {
        Plan::InlineOnly {
            error: DumpFileError::MessageLength {
                declared,
                available,
            },
        }
    } else if declared > limits.max_message_len {
        Plan::InlineOnly {
            error: DumpFileError::MessageTooLarge {
                len: declared,
                limit: limits.max_message_len,
            },
        }
    } else {
        Plan::Binary {
            message_len: declared,
        }
    })
}

/// `true` when an inline (v1) parse should be tried (the file fits the limit); else the error
/// to report instead of `v2_error`, if any.
pub(super) fn inline_allowed(
    first_byte: u8,
    file_len: u64,
    limits: &Limits,
) -> Result<bool, DumpFileError> {
    if file_len <= limits.max_message_len {
        return Ok(true);
    }
    // A v1 file starts with field 1 (version, a string): tag 0x0A.
    if first_byte == 0x0A {
        return Err(DumpFileError::MessageTooLarge {
            len: file_len,
            limit: limits.max_message_len,
        });
    }
    Ok(false)
}

/// Chooses between the v2 error and the v1 error when neither variant decodes: a header that
/// fit means the file was meant as v2; otherwise a first byte of `0x0A` means v1.
pub(super) fn pick_error(
    binary_fit: bool,
    first_byte: u8,
    v2: DumpFileError,
    v1: DumpFileError,
) -> DumpFileError {
    if !binary_fit && first_byte == 0x0A {
        v1
    } else {
        v2
    }
}

fn header(m: Message, container: Container, file_len: u64, payload_end: u64) -> DumpHeader {
    DumpHeader {
        container,
        version: m.version,
        dump_time: m.dump_time,
        op_name: m.op_name,
        attrs: m.attrs,
        dfx_message: m.dfx_message,
        tensors: Vec::new(),
        file_len,
        payload_end,
    }
}

/// Places the payloads of a v2 file after the message: inputs, outputs, buffers, workspaces,
/// each `size` bytes, no padding; every one must end within the file.
pub(super) fn place_binary(
    mut m: Message,
    message_len: u64,
    file_len: u64,
) -> Result<DumpHeader, DumpFileError> {
    let groups = core::mem::take(&mut m.tensors);
    let mut h = header(m, Container::Binary { message_len }, file_len, 0);
    let mut at = HEADER_LEN + message_len;
    for raw in groups.into_iter().flatten() {
        let mut t = raw.meta;
        t.ordinal = h.tensors.len();
        t.offset = at;
        at = match at.checked_add(t.size) {
            Some(end) if end <= file_len => end,
            _ => {
                return Err(DumpFileError::PayloadPastEnd {
                    tensor: t.id(),
                    size: t.size,
                    offset: at,
                    file_len,
                });
            }
        };
        h.tensors.push(t);
    }
    h.payload_end = at;
    Ok(h)
}

/// Places the payloads of a v1 file: each tensor's bytes are its `data` field. `None` when the
/// message says `version "2.0"` (old msaccucmp refuses those as v1).
pub(super) fn place_inline(mut m: Message, file_len: u64) -> Option<DumpHeader> {
    if m.version == "2.0" {
        return None;
    }
    let groups = core::mem::take(&mut m.tensors);
    let mut h = header(m, Container::Inline, file_len, file_len);
    for raw in groups.into_iter().flatten() {
        let mut t = raw.meta;
        t.ordinal = h.tensors.len();
        (t.offset, t.size) = raw.data;
        h.tensors.push(t);
    }
    Some(h)
}

/// Decodes the whole file `file` (either variant) with the default [`Limits`].
pub fn decode(file: &[u8]) -> Result<DumpHeader, DumpFileError> {
    decode_with(file, Limits::default())
}

/// Decodes the whole file `file` (either variant) under `limits`. Every tensor's bytes are
/// then `file[t.offset..t.end()]` ([`TensorMeta::bytes_in`]).
pub fn decode_with(file: &[u8], limits: Limits) -> Result<DumpHeader, DumpFileError> {
    let file_len = file.len() as u64;
    let first = file.first().copied().unwrap_or(0);
    let (v2_error, fit) = match plan(file, file_len, &limits)? {
        Plan::Binary { message_len } => {
            // message_len <= file_len - 8, so the range is in bounds.
            let msg = &file[HEADER_LEN as usize..(HEADER_LEN + message_len) as usize];
            match message::decode(msg, HEADER_LEN, limits)
                .and_then(|m| place_binary(m, message_len, file_len))
            {
                Ok(h) => return Ok(h),
                Err(e) => (e, true),
            }
        }
        Plan::InlineOnly { error } => (error, false),
    };
    match inline_allowed(first, file_len, &limits) {
        Ok(true) => {}
        Ok(false) => return Err(v2_error),
        Err(e) => return Err(pick_error(fit, first, v2_error, e)),
    }
    match message::decode(file, 0, limits) {
        Ok(m) => place_inline(m, file_len).ok_or(v2_error),
        Err(v1_error) => Err(pick_error(fit, first, v2_error, v1_error)),
    }
}

impl TensorMeta {
    /// This tensor's bytes within the whole file `file`; `None` if `file` is shorter than the
    /// file that was decoded.
    pub fn bytes_in<'a>(&self, file: &'a [u8]) -> Option<&'a [u8]> {
        let start = usize::try_from(self.offset).ok()?;
        let end = usize::try_from(self.end()).ok()?;
        file.get(start..end)
    }
}
