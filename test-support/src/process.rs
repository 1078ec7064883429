//! Running the programs the probes and the tmpfs need: no input, no output, the exit status.

use std::{
    path::Path,
    process::{Command, Stdio},
};

/// Runs `cmd` with no input or output; `Ok` when it exits with status 0.
pub(crate) fn run_ok(cmd: &mut Command) -> Result<(), String> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    match cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "`{program}` exited with {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run `{program}`: {e}")),
    }
}

/// `mount -t tmpfs -o size={size} tmpfs {dir}`, creating `dir` first.
pub(crate) fn mount_tmpfs(dir: &Path, size: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    run_ok(
        Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size}"))
            .arg("tmpfs")
            .arg(dir),
    )
}

/// A child process that is killed (and reaped) when this is dropped, so a test that fails while
/// its child runs leaves no orphan behind (a 100000-step demo, a convert of thousands of files).
/// The child is the public field: `k.0.kill()` and `k.0.wait()` for a kill the test means.
#[derive(Debug)]
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
