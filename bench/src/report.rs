//! The outputs: `results.json`, `results.md` (the tables), `plot.svg`, and the page `bench/RESULTS.md`, which is
//! rewritten only when the outputs go to `bench/results` (the default); elsewhere the page is `<out>/RESULTS.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::accuracy::Accuracy;
use crate::cluster::ClusterScaling;
use crate::contender::ContenderKind;
use crate::harness::BenchResults;
use crate::latency::RunStats;
use crate::node::{NpmReport, WorkerReport};
use crate::plot;
use crate::redis_cost::{Cost, RedisCost};
use crate::scaling::Scaling;
use crate::support::{ratio, Context};
use crate::throughput::{LoadComparison, Scoping, Throughput};
use crate::weighted::Weighted;

/// Where `edgelimit-bench` writes by default, relative to the checkout.
pub const DEFAULT_OUT: &str = "bench/results";

/// Writes every output of `results`; returns the paths written.
pub fn write(results: &BenchResults, checkout: &Path, out: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).context(format_args!("could not create {}", out.display()))?;
    let json = serde_json::to_string_pretty(results).context("could not serialise the results")?;
    let page = page_location(checkout, out);
    let files = [
        (out.join("results.json"), json + "\n"),
        (out.join("results.md"), results_markdown(results)),
        (out.join("plot.svg"), plot::svg(results)?),
        (page.path, results_page(results, &page.plot_link)),
    ];
    let mut written = Vec::new();
    for (path, text) in files {
        std::fs::write(&path, text).context(format_args!("could not write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// Where the page goes, and how it links to the plot.
struct PageLocation {
    path: PathBuf,
    plot_link: String,
}

fn page_location(checkout: &Path, out: &Path) -> PageLocation {
    let default_out = checkout.join(DEFAULT_OUT);
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same(out, &default_out) {
        PageLocation {
            path: checkout.join("bench/RESULTS.md"),
            plot_link: "results/plot.svg".to_owned(),
        }
    } else {
        PageLocation {
            path: out.join("RESULTS.md"),
            plot_link: "plot.svg".to_owned(),
        }
    }
}

/// `results.md`: the machine and the tables.
pub fn results_markdown(results: &BenchResults) -> String {
    format!(
        "# edgelimit benchmark results\n\n{}{}",
        machine_section(results),
        tables(results)
    )
}

/// `bench/RESULTS.md`: what this is, the machine, how to reproduce and read it, the plot and the tables.
pub fn results_page(results: &BenchResults, plot_link: &str) -> String {
    let mut page = String::from(
        "# edgelimit benchmarks\n\n\
         What edgelimit costs and how exact it is, measured next to the limiters it competes with: \
         `@upstash/ratelimit` (its own scripts, from the installed npm package) and Redisson's `RRateLimiter` (its \
         acquire script), with a plain `INCR` as the floor and `redis-benchmark` as the ceiling. Every scenario runs \
         all contenders in one run, on one private `redis-server` and one bridge, so the **ratios** between them are \
         what to read: absolute numbers move with the machine and its load. This page is written by `scripts/bench` \
         (`edgelimit-bench`); do not edit it by hand.\n\n\
         Before/after figures of single changes, measured by hand in one run each: \
         [BEFORE-AFTER.md](BEFORE-AFTER.md).\n\n",
    );
    page.push_str(&machine_section(results));
    page.push_str(
        "## Reproduce\n\n\
         One command, from the repository root (it installs what is missing, builds the benchmark driver in release \
         and the npm package, then runs every scenario in a few minutes and rewrites this page and `results/`):\n\n\
         ```sh\nscripts/bench\n```\n\n\
         `scripts/bench --quick` runs everything tiny (a check of the harness, not numbers to read); `--only \
         redis-cost,scaling,throughput,accuracy,worker,weighted,cluster` picks scenarios; `--no-node` skips the Node and Worker \
         measurements; `--out DIR` writes elsewhere (and leaves this page alone).\n\n\
         ## How to read the numbers\n\n\
         - **Redis µs per decision** is Redis's own CPU time for the call (`INFO commandstats`, after `CONFIG \
         RESETSTAT`, script cache warmed): the cost that decides how many decisions one Redis serves. It does not \
         include the network or the bridge. *Commands per decision* are what the script called inside Redis. Redis \
         shares this machine's two cores with the bridge and the client, so these numbers move by 10–25 % from run \
         to run (each contender shows the cheapest of 3 rounds, the contenders taking turns, each round's requests \
         back to back): smaller differences are noise.\n\
         - **Server clock vs explicit time**: edgelimit decides on the Redis server's clock by default (a `TIME` \
         call inside the script); with an explicit time the caller passes it, as the peers always do. Both are \
         shown so the clock's cost is visible.\n\
         - **Ratios** `a / b` compare µs per decision; below 1.00 means `a` costs Redis less. The floor is `INCR` \
         inside a one-line script: what any script costs at least.\n\
         - **Memory** is `MEMORY USAGE … SAMPLES 0` of an identifier's keys after one request (idle) and after the \
         workload (busy). For the Redisson layout it includes the limiter's config hash.\n\
         - **Throughput** runs share the machine's two cores between the client, the bridge and Redis; \
         `redis-benchmark` speaks RESP straight to Redis, so *bridge / direct* is the price of HTTP + JSON. With \
         `wrk` as the client, *hello-world / direct* is what HTTP alone would serve of what Redis does on this \
         machine, and *bridge / hello-world* what of that the bridge keeps. *ACL \
         off / admin* is the price of the bridge's fence for a `limiter` token, *ACL user / admin* that of the fence \
         and the token's own Redis ACL user together.\n\
         - **Accuracy**: the most grants in any interval-long span, divided by the limit. 1.00 is exact; each \
         algorithm's *promise* is what it guarantees for such a span (a fixed window only per aligned window, a \
         bucket its burst plus the refill). `@upstash/ratelimit` and Redisson decide on each caller's clock, so with \
         clients whose clocks differ (as real ones do) they can admit more than they promise; edgelimit decides on \
         the server's clock.\n\n",
    );
    let _ = write!(page, "![plot]({plot_link})\n\n");
    page.push_str(&tables(results));
    page
}

fn machine_section(results: &BenchResults) -> String {
    let machine = &results.machine;
    let scenarios: Vec<String> = results
        .scenarios
        .iter()
        .filter_map(|scenario| scenario.to_possible_value())
        .map(|value| value.get_name().to_owned())
        .collect();
    let run = format!(
        "{:.0} s{}{}; scenarios: {}",
        results.seconds,
        if results.quick {
            ", **--quick** (tiny sizes: not numbers to read)"
        } else {
            ""
        },
        if results.node { "" } else { ", without Node" },
        scenarios.join(", ")
    );
    let rows = [
        ("CPU", format!("{} ({} cores)", machine.cpu, machine.cores)),
        ("kernel", machine.kernel.clone()),
        ("redis-server", machine.redis_server.clone()),
        ("node", machine.node.clone().unwrap_or_else(|| "not found".to_owned())),
        ("commit", machine.git_commit.clone()),
        ("date", machine.date.clone()),
        ("run", run),
    ];
    let rows = rows.into_iter().map(|(what, value)| vec![what.to_owned(), value]);
    format!("## Machine\n\n{}", table(&["", ""], rows))
}

/// Every measured scenario's tables, in the scenarios' numbered order.
pub fn tables(results: &BenchResults) -> String {
    [
        results.redis_cost.as_ref().map(redis_cost_tables),
        results.scaling.as_ref().map(scaling_table),
        results.throughput.as_ref().map(throughput_tables),
        results.redis_cost.as_ref().map(memory_table),
        results.accuracy.as_ref().map(accuracy_tables),
        results.worker.as_ref().map(worker_table),
        results.weighted.as_ref().map(weighted_tables),
        results.cluster.as_ref().map(cluster_table),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A Markdown table, with a blank line after it.
fn table(headers: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let headers: Vec<String> = headers.iter().map(|header| (*header).to_owned()).collect();
    let mut text = line(&headers);
    text.push_str(&line(&vec!["---".to_owned(); headers.len()]));
    for row in rows {
        text.push_str(&line(&row));
    }
    text.push('\n');
    text
}

fn micros(cost: &Cost) -> f64 {
    cost.decision.micros_per_decision
}

fn two(value: f64) -> String {
    format!("{value:.2}")
}

fn times(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_owned(), |value| format!("{value:.2}×"))
}

fn redis_cost_tables(cost: &RedisCost) -> String {
    let floor = &cost.floor;
    let mut text = format!(
        "## 1. Redis cost per decision\n\nA limit of {} per {} ms on one identifier, {} requests per contender. At \
         explicit times: two per ms over {} ms, so about half are denied. On the server clock times cannot be \
         chosen: the same {} requests are sent as fast as one client can. Floor: `INCR` in a one-line script {:.2} \
         µs, as a plain command {:.2} µs.\n\n",
        cost.limit,
        cost.window_ms,
        cost.requests,
        cost.explicit_ms,
        cost.requests,
        micros(&floor.script),
        micros(&floor.command)
    );
    let rows = cost.algorithms.iter().map(|row| {
        let (peer, peer_us) = match &row.peer {
            Some(peer) => (peer.kind.label(), two(micros(&peer.cost))),
            None => ("–", "–".to_owned()),
        };
        vec![
            row.algorithm.clone(),
            two(micros(&row.server_clock)),
            two(micros(&row.explicit_time)),
            peer.to_owned(),
            peer_us,
            times(row.ratios.server_clock_to_peer),
            times(row.ratios.server_clock_to_floor),
            times(row.ratios.explicit_time_to_floor),
            times(row.ratios.peer_to_floor),
        ]
    });
    text.push_str(&table(
        &[
            "algorithm",
            "edgelimit, server clock µs",
            "edgelimit, explicit time µs",
            "peer",
            "peer µs",
            "server clock / peer",
            "server clock / floor",
            "explicit time / floor",
            "peer / floor",
        ],
        rows,
    ));
    text.push_str(
        "### Commands per decision\n\nCommands the decision ran inside Redis besides its own `EVALSHA` (a \
         server-clock decision's `TIME` included).\n\n",
    );
    let rows = every_cost(cost).into_iter().map(|(algorithm, kind, cost)| {
        let decision = &cost.decision;
        vec![
            algorithm.to_owned(),
            kind.label().to_owned(),
            two(decision.micros_per_decision),
            two(decision.commands_per_decision),
            format!("{} of {}", decision.granted, decision.requests),
        ]
    });
    text.push_str(&table(
        &["algorithm", "contender", "µs/decision", "commands/decision", "granted"],
        rows,
    ));
    text
}

fn memory_table(cost: &RedisCost) -> String {
    let rows = every_cost(cost).into_iter().map(|(algorithm, kind, cost)| {
        vec![
            algorithm.to_owned(),
            kind.label().to_owned(),
            cost.bytes_idle.to_string(),
            cost.bytes_busy.to_string(),
        ]
    });
    format!(
        "## 4. Memory per identifier\n\nBytes of an identifier's keys (`MEMORY USAGE … SAMPLES 0`) after one \
         request (idle) and after the workload of section 1 (busy). For the Redisson layout this includes the \
         limiter's config hash.\n\n{}",
        table(&["algorithm", "contender", "bytes idle", "bytes busy"], rows)
    )
}

/// Every measurement of scenario 1, floor first, as (algorithm, contender, cost).
fn every_cost(cost: &RedisCost) -> Vec<(&str, ContenderKind, &Cost)> {
    let mut all = vec![
        ("floor", ContenderKind::IncrCommand, &cost.floor.command),
        ("floor", ContenderKind::IncrScript, &cost.floor.script),
    ];
    for row in &cost.algorithms {
        all.push((&row.algorithm, ContenderKind::EdgelimitServerClock, &row.server_clock));
        all.push((&row.algorithm, ContenderKind::EdgelimitExplicitTime, &row.explicit_time));
        if let Some(peer) = &row.peer {
            all.push((&row.algorithm, peer.kind, &peer.cost));
        }
    }
    all
}

fn scaling_table(scaling: &Scaling) -> String {
    let rows = scaling.rows.iter().map(|row| {
        vec![
            row.rate.to_string(),
            two(row.family.micros_per_decision),
            two(row.redisson_layout.micros_per_decision),
            two(row.redisson.micros_per_decision),
            times(row.family_to_redisson),
            times(row.redisson_layout_to_redisson),
            format!(
                "{:.1} · {:.1} · {:.1}",
                row.family.commands_per_decision,
                row.redisson_layout.commands_per_decision,
                row.redisson.commands_per_decision
            ),
        ]
    });
    format!(
        "## 2. Sliding-log scaling\n\nRedis µs per decision as the log grows: at rate R the interval is R ms and \
         one grant is made per ms, so the log holds R grants; {} ms of steady state (one grant and one denial per \
         ms) at explicit times on every side; each contender shows the cheapest of 3 rounds, the contenders taking \
         turns.\n\n{}",
        scaling.measured_ms,
        table(
            &[
                "grants in the window",
                "edgelimit family µs",
                "edgelimit Redisson layout µs",
                "Redisson µs",
                "family / Redisson",
                "Redisson layout / Redisson",
                "commands/decision: family · layout · Redisson",
            ],
            rows
        )
    )
}

/// Requests/s, p50 and p99 ms: three cells.
fn run_cells(stats: &RunStats) -> [String; 3] {
    [format!("{:.0}", stats.per_second), two(stats.p50_ms), two(stats.p99_ms)]
}

/// Requests/s, p50 and p99 µs to a tenth: three cells, fine enough to show differences of a µs.
fn run_cells_in_micros(stats: &RunStats) -> [String; 3] {
    let micros = |ms: f64| format!("{:.1}", ms * 1000.0);
    [
        format!("{:.0}", stats.per_second),
        micros(stats.p50_ms),
        micros(stats.p99_ms),
    ]
}

fn throughput_tables(throughput: &Throughput) -> String {
    let rows = throughput.rows.iter().map(|row| {
        let mut cells = vec![row.operation.clone(), row.concurrency.to_string()];
        cells.extend(run_cells(&row.bridge));
        cells.extend(run_cells(&row.redis_benchmark));
        cells.push(times(row.bridge_to_direct));
        match &row.plain_http {
            Some(plain) => cells.push(format!("{:.0}", plain.per_second)),
            None => cells.push("–".to_owned()),
        }
        cells.push(times(row.bridge_to_plain_http));
        cells
    });
    let mut text = format!(
        "## 3. Throughput and latency\n\nThe Rust client (`Limiter::limit`, {}) through the bridge for {} s per \
         run, next to `redis-benchmark` sending the same `EVALSHA` (same key and arguments) straight to Redis, {} \
         requests per run. `PING` shows what the bridge itself adds; the same client's `PING` to a hello-world HTTP \
         server (`edgelimit-bench-hello`, a process of its own on the bridge's HTTP stack; it answers at once: no \
         Redis, no token, no JSON read) shows how much of that is HTTP and the client.\n\n{}",
        throughput.limit,
        throughput.seconds,
        throughput.redis_benchmark_requests,
        table(
            &[
                "operation",
                "in flight",
                "bridge /s",
                "p50 ms",
                "p99 ms",
                "redis-benchmark /s",
                "p50 ms",
                "p99 ms",
                "bridge / direct",
                "plain HTTP /s",
                "bridge / plain HTTP",
            ],
            rows
        )
    );
    if let Some(load) = &throughput.load {
        text.push_str(&load_table(load));
    }
    if let Some(scoping) = &throughput.scoping {
        text.push_str(&scoping_table(scoping));
    }
    if let Some(npm) = &throughput.npm {
        text.push_str(&npm_tables(npm));
    }
    text
}

fn load_table(load: &LoadComparison) -> String {
    let rows = load.rows.iter().map(|row| {
        let mut cells = vec![row.operation.clone(), row.concurrency.to_string()];
        cells.extend(run_cells(&row.bridge));
        cells.extend(run_cells(&row.direct));
        cells.extend(run_cells(&row.hello_world));
        cells.push(times(row.bridge_to_direct));
        cells.push(times(row.bridge_to_hello_world));
        cells.push(times(row.hello_world_to_direct));
        cells
    });
    format!(
        "### The bridge under a load generator\n\nThe Rust client costs about as much per request as the bridge, in \
         the benchmark's own process. Here `{}` (one thread) sends the same requests (the decision's `EVALSHA` as \
         the client sends it, and `PING`; `POST /`, admin token, `Upstash-Encoding: base64`) to the bridge and to \
         the hello-world server, {} s per run, next to `redis-benchmark` sending the same command straight to Redis, \
         {} requests per run: two load generators that cost their sides alike. {} rounds, the three taking turns, \
         who goes first rotating; each shows its fastest run. Everything shares the machine's two cores: the bridge's \
         requests also cost Redis and the generator theirs, the hello-world server's cost nothing else.{}\n\n{}",
        load.generator,
        load.seconds,
        load.redis_benchmark_requests,
        load.rounds,
        load.worker_threads.map_or_else(String::new, |threads| format!(
            " The bridge (in the benchmark's process, idle but for it while `wrk` runs) and the hello-world server run \
             as the `edgelimit` binary does: {threads} worker thread(s) (half the cores), mimalloc."
        )),
        table(
            &[
                "operation",
                "in flight",
                "bridge /s",
                "p50 ms",
                "p99 ms",
                "redis-benchmark /s",
                "p50 ms",
                "p99 ms",
                "hello-world /s",
                "p50 ms",
                "p99 ms",
                "bridge / direct",
                "bridge / hello-world",
                "hello-world / direct",
            ],
            rows
        )
    )
}

fn scoping_table(scoping: &Scoping) -> String {
    let rows = scoping.rows.iter().map(|row| {
        let mut cells = vec![row.concurrency.to_string()];
        cells.extend(run_cells_in_micros(&row.admin));
        cells.extend(run_cells_in_micros(&row.limiter_acl_off));
        cells.push(times(row.acl_off_to_admin));
        cells.extend(run_cells_in_micros(&row.limiter_acl_user));
        cells.push(times(row.acl_user_to_admin));
        cells
    });
    format!(
        "### What scoping a token costs\n\nThe same decisions through the bridge with three tokens: the admin \
         token (no fence, on the `--redis` user's connection), a `limiter` token on a bridge run with \
         `--redis-acl off` (the fence's checks alone) and a `limiter` token with its own Redis ACL user (the fence, \
         on that user's connection: the default). {} rounds of {} s per token and concurrency, the tokens taking \
         turns, who goes first rotating; each token shows its fastest round (the one least slowed by the machine's \
         other load). Ratios compare requests/s: below 1.00, the scoped token serves fewer. Latencies in µs: what a \
         token's checks add is a few of them.\n\n{}",
        scoping.rounds,
        scoping.seconds,
        table(
            &[
                "in flight",
                "admin /s",
                "p50 µs",
                "p99 µs",
                "limiter, ACL off /s",
                "p50 µs",
                "p99 µs",
                "ACL off / admin",
                "limiter, ACL user /s",
                "p50 µs",
                "p99 µs",
                "ACL user / admin",
            ],
            rows
        )
    )
}

fn npm_tables(npm: &NpmReport) -> String {
    let (size, cold, flow) = (&npm.package, &npm.cold_start, &npm.throughput);
    let rows = flow.algorithms.iter().map(|row| {
        let mut cells = vec![row.algorithm.clone()];
        cells.extend(run_cells(&row.edgelimit));
        cells.extend(run_cells(&row.upstash_plain));
        cells.push(times(ratio(row.edgelimit.per_second, row.upstash_plain.per_second)));
        cells.extend(run_cells(&row.upstash_pipelined));
        cells.push(times(ratio(row.edgelimit.per_second, row.upstash_pipelined.per_second)));
        cells
    });
    let throughput = table(
        &[
            "algorithm",
            "edgelimit /s",
            "p50 ms",
            "p99 ms",
            "@upstash, no auto-pipelining /s",
            "p50 ms",
            "p99 ms",
            "edgelimit / @upstash plain",
            "@upstash, auto-pipelining /s",
            "p50 ms",
            "p99 ms",
            "edgelimit / @upstash pipelined",
        ],
        rows,
    );
    let cold_starts = table(
        &[
            &format!("cold start to the first decision (median of {})", cold.samples),
            "edgelimit ms",
            "baseline ms",
            "baseline is",
        ],
        [
            [
                "Node: process start → first decision",
                &format!("{:.1}", cold.node_edgelimit_ms),
                &format!("{:.1}", cold.node_upstash_ms),
                "@upstash/ratelimit + @upstash/redis",
            ],
            [
                "workerd: new Miniflare → first response",
                &format!("{:.1}", cold.workerd_edgelimit_ms),
                &format!("{:.1}", cold.workerd_no_limiter_ms),
                "a Worker without a limiter",
            ],
        ]
        .map(|row| row.map(str::to_owned).to_vec()),
    );
    let sizes = table(
        &["package part", "raw bytes", "gzip bytes"],
        [
            [
                "core_bg.wasm".to_owned(),
                size.wasm_raw.to_string(),
                size.wasm_gzip.to_string(),
            ],
            [
                "JS (glue, layer, entry points)".to_owned(),
                size.js_raw.to_string(),
                size.js_gzip.to_string(),
            ],
            ["index.d.ts".to_owned(), size.types.to_string(), "–".to_owned()],
        ]
        .map(|row| row.to_vec()),
    );
    format!(
        "### The npm package, from Node\n\n`bench/npm.mjs` through the same bridge: {} requests in flight, {} s \
         per run, best of {} rounds; every request allowed. `@upstash/redis` auto-pipelines by default (commands \
         of one tick share an HTTP request), and edgelimit coalesces decisions made at once by default (see \
         \"Coalescing\" below), so both of theirs are shown.\n\n{throughput}{cold_starts}{sizes}",
        flow.in_flight, flow.seconds, flow.rounds
    )
}

fn accuracy_tables(accuracy: &Accuracy) -> String {
    let bursts = accuracy.boundary_bursts.iter().map(|row| {
        vec![
            row.algorithm.clone(),
            row.kind.label().to_owned(),
            two(row.at_boundary),
            two(row.half_interval_after),
            two(row.promise),
        ]
    });
    let bursts = table(
        &[
            "algorithm",
            "contender",
            "second burst at the boundary",
            "second burst ½ interval later",
            "promise",
        ],
        bursts,
    );
    let concurrent = &accuracy.concurrent;
    let skews: Vec<String> = concurrent.skews_ms.iter().map(|skew| format!("{skew:+}")).collect();
    let clients = concurrent.rows.iter().map(|row| {
        vec![
            row.algorithm.clone(),
            row.kind.label().to_owned(),
            row.requests.to_string(),
            row.granted.to_string(),
            two(row.most_in_any_interval),
            two(row.promise),
            row.grant_times.label().to_owned(),
        ]
    });
    let clients = table(
        &[
            "algorithm",
            "contender",
            "requests",
            "granted",
            "most in any interval / limit",
            "promise",
            "grant times from",
        ],
        clients,
    );
    format!(
        "## 5. Accuracy: over-admission\n\nThe most grants in any {} ms span, divided by the limit ({}); 1.00 is \
         exact. *Promise*: the most the algorithm allows in such a span.\n\n\
         ### (a) Window-boundary bursts, explicit times\n\n`limit` requests 1 ms before a window boundary, then \
         `limit` more at the boundary or half an interval after it.\n\n{bursts}\
         ### (b) {} concurrent clients, {} s of real time\n\nedgelimit decides on the Redis server's clock; the \
         peers on each client's clock: this machine's plus a skew (seed {}: {} ms), as real clients' clocks \
         differ. Grant times: from edgelimit's reply where the algorithm names them exactly, else this \
         machine's clock when the reply arrived.\n\n{clients}",
        accuracy.interval_ms,
        accuracy.limit,
        concurrent.clients,
        concurrent.seconds,
        concurrent.skew_seed,
        skews.join(", ")
    )
}

fn worker_table(worker: &WorkerReport) -> String {
    let added = |value: Option<f64>| value.map_or_else(|| "–".to_owned(), |ms| format!("{ms:+.2}"));
    let baseline_cold_start = worker.workers.first().map(|run| run.cold_start_ms);
    let rows = worker.workers.iter().map(|run| {
        vec![
            run.name.clone(),
            two(run.p50_ms),
            two(run.p99_ms),
            added(run.added_p50_ms),
            added(run.added_p99_ms),
            format!("{:.0}", run.cold_start_ms),
            times(baseline_cold_start.map(|baseline| run.cold_start_ms / baseline)),
            format!("{:.1}", run.bundle_kib),
            format!("{:.1}", run.bundle_gzip_kib),
        ]
    });
    format!(
        "## 6. The Worker in local workerd\n\n`bench/worker.mjs`: the same proxy Worker with no limiter, with \
         edgelimit (the real bundle, one sliding-window rule) and with `@upstash/ratelimit`, through the same \
         bridge, and with edgelimit's wasm module compiled and instantiated but never called (what loading the \
         module costs, before edgelimit reads its rules or decides anything); {} rounds × {} sequential requests per Worker, taking turns; every request allowed. Cold \
         start: a new workerd to the first response, the median of {} launches per Worker, taking turns.\n\n{}",
        worker.rounds,
        worker.requests,
        worker.cold_starts,
        table(
            &[
                "Worker",
                "p50 ms",
                "p99 ms",
                "added p50 ms",
                "added p99 ms",
                "cold start ms",
                "cold start vs no limiter",
                "bundle KiB",
                "gzip KiB",
            ],
            rows
        )
    )
}

fn weighted_tables(weighted: &Weighted) -> String {
    let by_weight = weighted.by_weight.iter().map(|row| {
        vec![
            row.algorithm.clone(),
            row.permits.to_string(),
            two(row.cost.micros_per_decision),
            two(row.cost.commands_per_decision),
            format!("{} of {}", row.cost.granted, row.cost.requests),
            times(row.to_one_permit),
        ]
    });
    let denied = weighted.denied.iter().map(|row| {
        vec![
            row.log.clone(),
            row.permits.to_string(),
            two(row.cost.micros_per_decision),
            two(row.cost.commands_per_decision),
            format!("{} of {}", row.cost.requests - row.cost.granted, row.cost.requests),
            times(row.to_small_log),
        ]
    });
    format!(
        "## 7. Weighted decisions on the permit log\n\nThe sliding log and concurrency keep one member per grant, \
         whatever its permits, so a decision's cost must not grow with the weight. Every log is filled first, then \
         the rows are measured in turn, {} rounds; each row shows its cheapest round.\n\n\
         ### (a) By weight\n\nA limit of {} per {} ms, never reached: one grant of *k* permits per ms of explicit \
         time after a full interval of them, so the log holds {} grants and each decision frees the oldest and logs \
         one. Concurrency's leases last the interval and are never released. A log of one-permit grants counts what it holds \
         with `ZCARD`; heavier grants also read the first grant: one command more, whatever the weight.\n\n{}\
         ### (b) A denied request's wait\n\nEach log is full to its limit (the sum of its grants' permits) and is \
         asked for permit counts spread from 1 to the limit, so the grant whose freeing would admit the request lies \
         anywhere in the log; nothing frees meanwhile. Equal weights: the search's first guess at the rank hits. \
         Mixed weights (seed {}): a binary search over ranks, one `ZRANGE` per step.\n\n{}",
        weighted.rounds,
        weighted.limit,
        weighted.interval_ms,
        weighted.grants_held,
        table(
            &[
                "algorithm",
                "permits per grant",
                "µs/decision",
                "commands/decision",
                "granted",
                "µs / 1-permit row",
            ],
            by_weight
        ),
        weighted.weight_seed,
        table(
            &[
                "log",
                "permits held",
                "µs/denied decision",
                "commands/decision",
                "denied",
                "µs / 10-grant log",
            ],
            denied
        )
    )
}

fn cluster_table(cluster: &ClusterScaling) -> String {
    let rows = cluster.rows.iter().map(|row| {
        let shares: Vec<String> = (row.master_shares.iter())
            .map(|share| format!("{:.0}%", share * 100.0))
            .collect();
        let mut cells = vec![row.concurrency.to_string()];
        cells.extend(run_cells(&row.single));
        cells.extend(run_cells(&row.cluster));
        cells.extend([
            times(row.cluster_to_single),
            two(row.single_micros),
            two(row.cluster_micros),
            shares.join(" / "),
            format!("{:.0}", row.single_redis_bound),
            format!("{:.0}", row.cluster_redis_bound),
        ]);
        cells
    });
    format!(
        "## 8. One Redis against a Redis Cluster

The Rust client through a bridge in front of one `redis-server`, \
         then through a bridge in front of a Redis Cluster of {} masters (no replicas), taking turns, {} runs of {} \
         s each per topology and concurrency; each shows its fastest. The decisions: {}. Client, bridges and every \
         Redis share this machine's two cores, so the cluster cannot decide more per second here: what carries over \
         to a cluster with a core per master is Redis's µs per decision on a master and how evenly the decisions \
         spread. The last two columns are that arithmetic, a prediction and not a measurement: one Redis core at \
         its µs per decision, and the cluster bounded by its busiest master.\n\n{}",
        cluster.masters,
        cluster.rounds,
        cluster.seconds,
        cluster.limit,
        table(
            &[
                "in flight",
                "one Redis /s",
                "p50 ms",
                "p99 ms",
                "cluster /s",
                "p50 ms",
                "p99 ms",
                "cluster / one",
                "Redis µs, one",
                "Redis µs, cluster master",
                "decisions per master",
                "predicted /s, one core",
                "predicted /s, a core per master",
            ],
            rows
        )
    )
}
