//! `edgelimit-bench`: every benchmark in one run. See `edgelimit-bench --help`; `scripts/bench` builds and runs it.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use edgelimit_bench::{report, BenchConfig};
use edgelimit_cli::say;

// The in-process bridge runs on the `edgelimit` binary's runtime and allocator, as in production.
fn main() -> ExitCode {
    let ran = edgelimit_cli::runtime::build(None)
        .map_err(|e| e.to_string())
        .and_then(|runtime| runtime.block_on(run(BenchConfig::parse())));
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("edgelimit-bench: {message}");
            ExitCode::from(2)
        }
    }
}

/// Runs the scenarios asked for and writes every output.
async fn run(mut config: BenchConfig) -> Result<(), String> {
    config.checkout = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    config.progress = std::io::stderr().is_terminal();
    let results = edgelimit_bench::run(&config).await?;
    for path in report::write(&results, &config.checkout, &config.checkout.join(&config.out))? {
        say!("wrote {}", path.display());
    }
    say!("edgelimit-bench finished in {:.0} s", results.seconds);
    Ok(())
}
