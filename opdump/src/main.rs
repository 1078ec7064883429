//! The `opdump` command-line tool; see `opdump --help` and [`opdump::cli`].
fn main() {
    // stderr is passed unlocked: each write takes the lock for that write only. Holding
    // `stderr().lock()` for the whole run deadlocked with a writer thread that reported a
    // failed write to stderr (issue 12, defect 1).
    let code = opdump::cli::run(
        std::env::args_os(),
        &dump_host::config::ProcessEnv,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    );
    std::process::exit(code);
}
