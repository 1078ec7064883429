//! The `opdump` command-line tool; see `opdump --help` and [`dump_host::cli`].
fn main() {
    let code = dump_host::cli::run(
        std::env::args_os(),
        &dump_host::config::ProcessEnv,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
