//! `edgelimit-bench`: every benchmark in one run. See `edgelimit-bench --help`; `scripts/bench` builds and runs it.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use edgelimit_bench::{report, BenchConfig, Scenario};
use edgelimit_cli::say;

/// Run the benchmarks: edgelimit next to @upstash/ratelimit, Redisson and the floor, on a private redis-server and
/// bridge. Run from the repository root; writes results.json, results.md and plot.svg to --out, and bench/RESULTS.md
/// when --out is the default.
#[derive(Parser)]
#[command(name = "edgelimit-bench", version)]
struct Cli {
    /// Small sizes everywhere: checks the harness in well under a minute; the numbers are not for reading.
    #[arg(long)]
    quick: bool,
    /// Only these scenarios (comma-separated).
    #[arg(long, value_delimiter = ',', value_enum)]
    only: Vec<Scenario>,
    /// Where to write the results.
    #[arg(long, default_value = report::DEFAULT_OUT)]
    out: PathBuf,
    /// Skip what runs in Node: the npm package's numbers and the Worker.
    #[arg(long)]
    no_node: bool,
}

// The in-process bridge runs on the `edgelimit` binary's runtime and allocator, as in production.
fn main() -> ExitCode {
    let ran = edgelimit_cli::runtime::build(None)
        .map_err(|e| e.to_string())
        .and_then(|runtime| runtime.block_on(run(Cli::parse())));
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("edgelimit-bench: {message}");
            ExitCode::from(2)
        }
    }
}

/// Runs the scenarios asked for and writes every output.
async fn run(cli: Cli) -> Result<(), String> {
    let checkout = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    let config = BenchConfig {
        checkout: checkout.clone(),
        quick: cli.quick,
        scenarios: if cli.only.is_empty() {
            Scenario::value_variants().to_vec()
        } else {
            cli.only
        },
        node: !cli.no_node,
        progress: std::io::stderr().is_terminal(),
    };
    let results = edgelimit_bench::run(&config).await?;
    for path in report::write(&results, &checkout, &checkout.join(cli.out))? {
        say!("wrote {}", path.display());
    }
    say!("edgelimit-bench finished in {:.0} s", results.seconds);
    Ok(())
}
