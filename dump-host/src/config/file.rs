//! Reading a config's bytes: the one place a `data_dump.json` file is opened, for
//! `opdump check` and the Dumper alike.
//!
//! Only regular files are read (a FIFO would block forever, `/dev/zero` never ends), and at most
//! [`MAX_CONFIG_BYTES`]: a larger file is refused before it is read to its end, with an error
//! naming the file, its size and the bound.

use std::io::Read;
use std::path::Path;

use crate::Error;

/// The largest config accepted, in bytes (64 MiB: about 600,000 `kernels` entries of 100
/// characters). MindSpore has no bound; opdump refuses larger input instead of reading it.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// The bytes of the config file at `path`: a regular file (symlinks followed) of at most
/// [`MAX_CONFIG_BYTES`]. Open failures carry MindSpore's text
/// (`Dump file:<p> open failed. Errno:<n>`).
pub fn read_config_file(path: &Path) -> Result<Vec<u8>, Error> {
    let io_err = |message: String| Error::Path {
        path: path.to_owned(),
        message,
    };
    let open_failed = |e: std::io::Error| Error::Io {
        path: path.to_owned(),
        source: std::io::Error::new(
            e.kind(),
            OpenFailed {
                path: path.to_owned(),
                source: e,
            },
        ),
    };
    // Checked before opening: opening a FIFO for reading blocks until a writer appears.
    let meta = std::fs::metadata(path).map_err(open_failed)?;
    check_regular(&meta).map_err(io_err)?;
    let file = std::fs::File::open(path).map_err(open_failed)?;
    // Checked again on the open file, in case the path was replaced in between.
    let meta = file.metadata().map_err(open_failed)?;
    check_regular(&meta).map_err(io_err)?;
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(io_err(too_large(meta.len())));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        // The file grew while it was read.
        return Err(io_err(too_large(bytes.len() as u64)));
    }
    Ok(bytes)
}

/// MindSpore's wording of a config that cannot be opened
/// (`Dump file:<p> open failed. Errno:<n>`), keeping the operating system's error as its cause.
#[derive(Debug)]
struct OpenFailed {
    path: std::path::PathBuf,
    source: std::io::Error,
}

impl std::fmt::Display for OpenFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Dump file:{} open failed. Errno:{} ({})",
            self.path.display(),
            self.source.raw_os_error().unwrap_or(0),
            self.source
        )
    }
}

impl std::error::Error for OpenFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The error text for a config of `len` bytes (more than [`MAX_CONFIG_BYTES`]).
pub(crate) fn too_large(len: u64) -> String {
    format!(
        "the dump config is too large: {len} bytes or more; allowed: at most {MAX_CONFIG_BYTES} \
         bytes ({} MiB)",
        MAX_CONFIG_BYTES >> 20
    )
}

fn check_regular(meta: &std::fs::Metadata) -> Result<(), String> {
    if meta.is_file() {
        return Ok(());
    }
    let kind = kind_of(meta);
    Err(format!(
        "the dump config is {kind}, not a regular file; allowed: a regular JSON file"
    ))
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_are_refused_without_reading() {
        let t = std::time::Instant::now();
        for (p, kind) in [
            ("/dev/zero", "a character device"),
            ("/dev/null", "a character device"),
            ("/", "a directory"),
        ] {
            let e = read_config_file(Path::new(p)).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{p}: the dump config is {kind}")),
                "{e}"
            );
            assert!(e.contains("allowed: a regular JSON file"), "{e}");
        }
        assert!(t.elapsed().as_secs() < 5, "refused without reading");
    }

    #[test]
    fn a_missing_file_has_mindspores_text() {
        let e = read_config_file(Path::new("/nonexistent/x.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Dump file:/nonexistent/x.json open failed. Errno:2"),
            "{e}"
        );
    }

    #[test]
    fn the_bound_is_enforced_on_sparse_files() {
        let dir = std::env::temp_dir().join(format!("opdump-cfg-bound-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("big.json");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(MAX_CONFIG_BYTES + 1).unwrap();
        let e = read_config_file(&p).unwrap_err().to_string();
        assert!(e.contains("too large") && e.contains("67108864"), "{e}");
        f.set_len(MAX_CONFIG_BYTES).unwrap();
        assert_eq!(read_config_file(&p).unwrap().len() as u64, MAX_CONFIG_BYTES);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
