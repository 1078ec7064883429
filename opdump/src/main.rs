//! The `opdump` command-line tool; see `opdump --help` and [`opdump::cli`].
fn main() {
    let code = opdump::cli::run(
        std::env::args_os(),
        &dump_host::config::ProcessEnv,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
