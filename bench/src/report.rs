//! The outputs: `results.json`, `results.md` (the tables), `plot.svg`, and the page `bench/RESULTS.md`, rewritten
//! only when the outputs go to `bench/results` (the default); elsewhere the page is `<out>/RESULTS.md`.

use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::accuracy::{Accuracy, ConcurrentClients};
use crate::cluster::ClusterScaling;
use crate::contender::ContenderKind;
use crate::harness::BenchResults;
use crate::latency::RunStats;
use crate::node::{NpmReport, WorkerReport};
use crate::plot;
use crate::redis_cost::{Cost, RedisCost};
use crate::redis_stats::DecisionCost;
use crate::scaling::Scaling;
use crate::support::{ratio, Context};
use crate::throughput::{LoadComparison, Scoping, Throughput};
use crate::weighted::Weighted;

/// Where `edgelimit-bench` writes by default, relative to the checkout.
pub const DEFAULT_OUT: &str = "bench/results";

/// The page's fixed text; `{machine}`, `{plot}` and `{tables}` are filled in.
const PAGE: &str = include_str!("results-page.md");

/// Writes every output of `results`; returns the paths written.
pub fn write(results: &BenchResults, checkout: &Path, out: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).context(format_args!("could not create {}", out.display()))?;
    let json = serde_json::to_string_pretty(results).context("could not serialise the results")?;
    let same = |a: &Path, b: &Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b);
    let (page, plot_link) = if same(out, &checkout.join(DEFAULT_OUT)) {
        (checkout.join("bench/RESULTS.md"), "results/plot.svg")
    } else {
        (out.join("RESULTS.md"), "plot.svg")
    };
    let files = [
        (out.join("results.json"), json + "\n"),
        (out.join("results.md"), results_markdown(results)),
        (out.join("plot.svg"), plot::svg(results)?),
        (page, results_page(results, plot_link)),
    ];
    let mut written = Vec::new();
    for (path, text) in files {
        std::fs::write(&path, text).context(format_args!("could not write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
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
    PAGE.replace("{machine}\n", &machine_section(results))
        .replace("{plot}", plot_link)
        .replace("{tables}\n", &tables(results))
}

const QUICK: &str = ", **--quick** (tiny sizes: not numbers to read)";

fn machine_section(results: &BenchResults) -> String {
    let machine = &results.machine;
    let scenarios: Vec<String> = (results.scenarios.iter())
        .filter_map(|scenario| Some(scenario.to_possible_value()?.get_name().to_owned()))
        .collect();
    let quick = if results.quick { QUICK } else { "" };
    let node = if results.node { "" } else { ", without Node" };
    let rows = [
        ("CPU", format!("{} ({} cores)", machine.cpu, machine.cores)),
        ("kernel", machine.kernel.clone()),
        ("redis-server", machine.redis_server.clone()),
        ("node", machine.node.clone().unwrap_or_else(|| "not found".to_owned())),
        ("commit", machine.git_commit.clone()),
        ("date", machine.date.clone()),
        (
            "run",
            format!(
                "{:.0} s{quick}{node}; scenarios: {}",
                results.seconds,
                scenarios.join(", ")
            ),
        ),
    ];
    let rows = rows.into_iter().map(|(what, value)| vec![what.to_owned(), value]);
    format!("## Machine\n\n{}", table(" | ", rows))
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

/// A Markdown table, `headers` separated by " | ", with a blank line after it.
fn table(headers: &str, rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let columns = headers.split(" | ").count();
    let mut text = format!("| {headers} |\n|{}\n", " --- |".repeat(columns));
    for row in rows {
        text.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    text.push('\n');
    text
}

fn two(value: f64) -> String {
    format!("{value:.2}")
}

fn times(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_owned(), |value| format!("{value:.2}×"))
}

/// Requests/s, then p50 and p99 in ms to two places (or, `in_micros`, in µs to one).
fn run_cells(stats: &RunStats, in_micros: bool) -> [String; 3] {
    let (scale, digits) = if in_micros { (1000.0, 1) } else { (1.0, 2) };
    let latency = |ms: f64| format!("{:.*}", digits, ms * scale);
    [
        format!("{:.0}", stats.per_second),
        latency(stats.p50_ms),
        latency(stats.p99_ms),
    ]
}

fn micros(cost: &Cost) -> f64 {
    cost.decision.micros_per_decision
}

fn redis_cost_tables(cost: &RedisCost) -> String {
    let rows = cost.algorithms.iter().map(|row| {
        let (peer, peer_us) = match &row.peer {
            Some(peer) => (peer.kind.label(), two(micros(&peer.cost))),
            None => ("–", "–".to_owned()),
        };
        let ratios = &row.ratios;
        let mut cells = vec![
            row.algorithm.clone(),
            two(micros(&row.server_clock)),
            two(micros(&row.explicit_time)),
        ];
        cells.extend([peer.to_owned(), peer_us]);
        let to_floor = [
            ratios.server_clock_to_floor,
            ratios.explicit_time_to_floor,
            ratios.peer_to_floor,
        ];
        cells.extend([ratios.server_clock_to_peer].into_iter().chain(to_floor).map(times));
        cells
    });
    let costs = table(
        "algorithm | edgelimit, server clock µs | edgelimit, explicit time µs | peer | peer µs | server clock / peer \
         | server clock / floor | explicit time / floor | peer / floor",
        rows,
    );
    let commands = every_cost(cost).into_iter().map(|(algorithm, kind, cost)| {
        let decision = &cost.decision;
        let granted = format!("{} of {}", decision.granted, decision.requests);
        let (us, commands) = (two(decision.micros_per_decision), two(decision.commands_per_decision));
        vec![algorithm.to_owned(), kind.label().to_owned(), us, commands, granted]
    });
    let commands = table(
        "algorithm | contender | µs/decision | commands/decision | granted",
        commands,
    );
    let RedisCost {
        limit,
        window_ms,
        requests,
        explicit_ms,
        ..
    } = cost;
    let (floor_script, floor_command) = (micros(&cost.floor.script), micros(&cost.floor.command));
    format!(
        "## 1. Redis cost per decision\n\nA limit of {limit} per {window_ms} ms on one identifier, {requests} requests \
         per contender. At explicit times: two per ms over {explicit_ms} ms, so about half are denied. On the server \
         clock times cannot be chosen: the same {requests} requests are sent as fast as one client can. Floor: `INCR` \
         in a one-line script {floor_script:.2} µs, as a plain command {floor_command:.2} µs.\n\n{costs}\
         ### Commands per decision\n\nCommands the decision ran inside Redis besides its own `EVALSHA` (a \
         server-clock decision's `TIME` included).\n\n{commands}"
    )
}

fn memory_table(cost: &RedisCost) -> String {
    let rows = every_cost(cost).into_iter().map(|(algorithm, kind, cost)| {
        let (idle, busy) = (cost.bytes_idle.to_string(), cost.bytes_busy.to_string());
        vec![algorithm.to_owned(), kind.label().to_owned(), idle, busy]
    });
    format!(
        "## 4. Memory per identifier\n\nBytes of an identifier's keys (`MEMORY USAGE … SAMPLES 0`) after one \
         request (idle) and after the workload of section 1 (busy). For the Redisson layout this includes the \
         limiter's config hash.\n\n{}",
        table("algorithm | contender | bytes idle | bytes busy", rows)
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
        let costs = [&row.family, &row.redisson_layout, &row.redisson];
        let mut cells = vec![row.rate.to_string()];
        cells.extend(costs.map(|cost| two(cost.micros_per_decision)));
        cells.extend([row.family_to_redisson, row.redisson_layout_to_redisson].map(times));
        cells.push(
            costs
                .map(|cost| format!("{:.1}", cost.commands_per_decision))
                .join(" · "),
        );
        cells
    });
    let rows = table(
        "grants in the window | edgelimit family µs | edgelimit Redisson layout µs | Redisson µs | family / Redisson \
         | Redisson layout / Redisson | commands/decision: family · layout · Redisson",
        rows,
    );
    format!(
        "## 2. Sliding-log scaling\n\nRedis µs per decision as the log grows: at rate R the interval is R ms and \
         one grant is made per ms, so the log holds R grants; {} ms of steady state (one grant and one denial per \
         ms) at explicit times on every side; each contender shows the cheapest of 3 rounds, the contenders taking \
         turns.\n\n{rows}",
        scaling.measured_ms
    )
}

fn throughput_tables(throughput: &Throughput) -> String {
    let rows = throughput.rows.iter().map(|row| {
        let mut cells = vec![row.operation.clone(), row.concurrency.to_string()];
        cells.extend(run_cells(&row.bridge, false));
        cells.extend(run_cells(&row.redis_benchmark, false));
        cells.push(times(row.bridge_to_direct));
        let plain = row.plain_http.as_ref();
        cells.push(plain.map_or_else(|| "–".to_owned(), |plain| format!("{:.0}", plain.per_second)));
        cells.push(times(row.bridge_to_plain_http));
        cells
    });
    let rows = table(
        "operation | in flight | bridge /s | p50 ms | p99 ms | redis-benchmark /s | p50 ms | p99 ms | bridge / direct \
         | plain HTTP /s | bridge / plain HTTP",
        rows,
    );
    let Throughput {
        limit,
        seconds,
        redis_benchmark_requests,
        ..
    } = throughput;
    let npm = throughput.npm.as_ref().map(npm_tables).unwrap_or_default();
    format!(
        "## 3. Throughput and latency\n\nThe Rust client (`Limiter::limit`, {limit}) through the bridge for {seconds} \
         s per run, next to `redis-benchmark` sending the same `EVALSHA` (same key and arguments) straight to Redis, \
         {redis_benchmark_requests} requests per run. `PING` shows what the bridge itself adds; the same client's \
         `PING` to a hello-world HTTP server (`edgelimit-bench-hello`, a process of its own on the bridge's HTTP \
         stack; it answers at once: no Redis, no token, no JSON read) shows how much of that is HTTP and the \
         client.\n\n{rows}{}{}{npm}",
        load_table(&throughput.load),
        scoping_table(&throughput.scoping)
    )
}

fn load_table(load: &LoadComparison) -> String {
    let rows = load.rows.iter().map(|row| {
        let mut cells = vec![row.operation.clone(), row.concurrency.to_string()];
        for stats in [&row.bridge, &row.direct, &row.hello_world] {
            cells.extend(run_cells(stats, false));
        }
        let ratios = [
            row.bridge_to_direct,
            row.bridge_to_hello_world,
            row.hello_world_to_direct,
        ];
        cells.extend(ratios.map(times));
        cells
    });
    let rows = table(
        "operation | in flight | bridge /s | p50 ms | p99 ms | redis-benchmark /s | p50 ms | p99 ms | hello-world /s \
         | p50 ms | p99 ms | bridge / direct | bridge / hello-world | hello-world / direct",
        rows,
    );
    let LoadComparison {
        generator,
        seconds,
        redis_benchmark_requests,
        rounds,
        worker_threads,
        ..
    } = load;
    format!(
        "### The bridge under a load generator\n\nThe Rust client costs about as much per request as the bridge, in \
         the benchmark's own process. Here `{generator}` (one thread) sends the same requests (the decision's \
         `EVALSHA` as the client sends it, and `PING`; `POST /`, admin token, `Upstash-Encoding: base64`) to the \
         bridge and to the hello-world server, {seconds} s per run, next to `redis-benchmark` sending the same \
         command straight to Redis, {redis_benchmark_requests} requests per run: two load generators that cost their \
         sides alike. {rounds} rounds, the three taking turns, who goes first rotating; each shows its fastest run. \
         Everything shares the machine's two cores: the bridge's requests also cost Redis and the generator theirs, \
         the hello-world server's cost nothing else. The bridge (in the benchmark's process, idle but for it while \
         `wrk` runs) and the hello-world server run as the `edgelimit` binary does: {worker_threads} worker \
         thread(s) (half the cores), mimalloc.\n\n{rows}"
    )
}

fn scoping_table(scoping: &Scoping) -> String {
    let rows = scoping.rows.iter().map(|row| {
        let mut cells = vec![row.concurrency.to_string()];
        cells.extend(run_cells(&row.admin, true));
        cells.extend(run_cells(&row.limiter_acl_off, true));
        cells.push(times(row.acl_off_to_admin));
        cells.extend(run_cells(&row.limiter_acl_user, true));
        cells.push(times(row.acl_user_to_admin));
        cells
    });
    let rows = table(
        "in flight | admin /s | p50 µs | p99 µs | limiter, ACL off /s | p50 µs | p99 µs | ACL off / admin | limiter, \
         ACL user /s | p50 µs | p99 µs | ACL user / admin",
        rows,
    );
    format!(
        "### What scoping a token costs\n\nThe same decisions through the bridge with three tokens: the admin \
         token (no fence, on the `--redis` user's connection), a `limiter` token on a bridge run with \
         `--redis-acl off` (the fence's checks alone) and a `limiter` token with its own Redis ACL user (the fence, \
         on that user's connection: the default). {} rounds of {} s per token and concurrency, the tokens taking \
         turns, who goes first rotating; each token shows its fastest round (the one least slowed by the machine's \
         other load). Ratios compare requests/s: below 1.00, the scoped token serves fewer. Latencies in µs: what a \
         token's checks add is a few of them.\n\n{rows}",
        scoping.rounds, scoping.seconds
    )
}

fn npm_tables(npm: &NpmReport) -> String {
    let (size, cold, flow) = (&npm.package, &npm.cold_start, &npm.throughput);
    let rows = flow.algorithms.iter().map(|row| {
        let mut cells = vec![row.algorithm.clone()];
        for peer in [&row.upstash_plain, &row.upstash_pipelined] {
            if cells.len() == 1 {
                cells.extend(run_cells(&row.edgelimit, false));
            }
            cells.extend(run_cells(peer, false));
            cells.push(times(ratio(row.edgelimit.per_second, peer.per_second)));
        }
        cells
    });
    let throughput = table(
        "algorithm | edgelimit /s | p50 ms | p99 ms | @upstash, no auto-pipelining /s | p50 ms | p99 ms | edgelimit / \
         @upstash plain | @upstash, auto-pipelining /s | p50 ms | p99 ms | edgelimit / @upstash pipelined",
        rows,
    );
    let cold_starts = [
        (
            "Node: process start → first decision",
            cold.node_edgelimit_ms,
            cold.node_upstash_ms,
        ),
        (
            "workerd: new Miniflare → first response",
            cold.workerd_edgelimit_ms,
            cold.workerd_no_limiter_ms,
        ),
    ];
    let baselines = ["@upstash/ratelimit + @upstash/redis", "a Worker without a limiter"];
    let cold_starts = cold_starts
        .into_iter()
        .zip(baselines)
        .map(|((what, ours, baseline), is)| {
            vec![
                what.to_owned(),
                format!("{ours:.1}"),
                format!("{baseline:.1}"),
                is.to_owned(),
            ]
        });
    let samples = cold.samples;
    let cold_starts = table(
        &format!("cold start to the first decision (median of {samples}) | edgelimit ms | baseline ms | baseline is"),
        cold_starts,
    );
    let sizes = [
        ("core_bg.wasm", size.wasm_raw.to_string(), size.wasm_gzip.to_string()),
        (
            "JS (glue, layer, entry points)",
            size.js_raw.to_string(),
            size.js_gzip.to_string(),
        ),
        ("index.d.ts", size.types.to_string(), "–".to_owned()),
    ];
    let sizes = sizes
        .into_iter()
        .map(|(part, raw, gzip)| vec![part.to_owned(), raw, gzip]);
    let sizes = table("package part | raw bytes | gzip bytes", sizes);
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
        let ratios = [row.at_boundary, row.half_interval_after, row.promise].map(two);
        [row.algorithm.clone(), row.kind.label().to_owned()]
            .into_iter()
            .chain(ratios)
            .collect()
    });
    let bursts = table(
        "algorithm | contender | second burst at the boundary | second burst ½ interval later | promise",
        bursts,
    );
    let concurrent = &accuracy.concurrent;
    let clients = concurrent.rows.iter().map(|row| {
        let mut cells = vec![row.algorithm.clone(), row.kind.label().to_owned()];
        cells.extend([row.requests.to_string(), row.granted.to_string()]);
        cells.extend([two(row.most_in_any_interval), two(row.promise)]);
        cells.push(row.grant_times.label().to_owned());
        cells
    });
    let clients = table(
        "algorithm | contender | requests | granted | most in any interval / limit | promise | grant times from",
        clients,
    );
    let skews: Vec<String> = concurrent.skews_ms.iter().map(|skew| format!("{skew:+}")).collect();
    let ConcurrentClients {
        clients: count,
        seconds,
        skew_seed,
        ..
    } = concurrent;
    format!(
        "## 5. Accuracy: over-admission\n\nThe most grants in any {} ms span, divided by the limit ({}); 1.00 is \
         exact. *Promise*: the most the algorithm allows in such a span.\n\n\
         ### (a) Window-boundary bursts, explicit times\n\n`limit` requests 1 ms before a window boundary, then \
         `limit` more at the boundary or half an interval after it.\n\n{bursts}\
         ### (b) {count} concurrent clients, {seconds} s of real time\n\nedgelimit decides on the Redis server's \
         clock; the peers on each client's clock: this machine's plus a skew (seed {skew_seed}: {} ms), as real \
         clients' clocks differ. Grant times: from edgelimit's reply where the algorithm names them exactly, else \
         this machine's clock when the reply arrived.\n\n{clients}",
        accuracy.interval_ms,
        accuracy.limit,
        skews.join(", ")
    )
}

fn worker_table(worker: &WorkerReport) -> String {
    let added = |value: Option<f64>| value.map_or_else(|| "–".to_owned(), |ms| format!("{ms:+.2}"));
    let baseline_cold_start = worker.workers.first().map(|run| run.cold_start_ms);
    let rows = worker.workers.iter().map(|run| {
        let mut cells = vec![run.name.clone(), two(run.p50_ms), two(run.p99_ms)];
        cells.extend([added(run.added_p50_ms), added(run.added_p99_ms)]);
        cells.push(format!("{:.0}", run.cold_start_ms));
        cells.push(times(baseline_cold_start.map(|baseline| run.cold_start_ms / baseline)));
        cells.extend([run.bundle_kib, run.bundle_gzip_kib].map(|kib| format!("{kib:.1}")));
        cells
    });
    let rows = table(
        "Worker | p50 ms | p99 ms | added p50 ms | added p99 ms | cold start ms | cold start vs no limiter | bundle \
         KiB | gzip KiB",
        rows,
    );
    let WorkerReport {
        rounds,
        requests,
        cold_starts,
        ..
    } = worker;
    format!(
        "## 6. The Worker in local workerd\n\n`bench/worker.mjs`: the same proxy Worker with no limiter, with \
         edgelimit (the real bundle, one sliding-window rule) and with `@upstash/ratelimit`, through the same \
         bridge, and with edgelimit's wasm module compiled and instantiated but never called (what loading the \
         module costs, before edgelimit reads its rules or decides anything); {rounds} rounds × {requests} \
         sequential requests per Worker, taking turns; every request allowed. Cold start: a new workerd to the \
         first response, the median of {cold_starts} launches per Worker, taking turns.\n\n{rows}"
    )
}

fn weighted_tables(weighted: &Weighted) -> String {
    let cells = |name: &str, permits: u32, cost: &DecisionCost, counted: u64, to_baseline: Option<f64>| {
        let mut cells = vec![name.to_owned(), permits.to_string()];
        cells.extend([two(cost.micros_per_decision), two(cost.commands_per_decision)]);
        cells.extend([format!("{counted} of {}", cost.requests), times(to_baseline)]);
        cells
    };
    let by_weight = (weighted.by_weight.iter()).map(|row| {
        cells(
            &row.algorithm,
            row.permits,
            &row.cost,
            row.cost.granted,
            row.to_one_permit,
        )
    });
    let by_weight = table(
        "algorithm | permits per grant | µs/decision | commands/decision | granted | µs / 1-permit row",
        by_weight,
    );
    let denied = weighted.denied.iter().map(|row| {
        let denied = row.cost.requests - row.cost.granted;
        cells(&row.log, row.permits, &row.cost, denied, row.to_small_log)
    });
    let denied = table(
        "log | permits held | µs/denied decision | commands/decision | denied | µs / 10-grant log",
        denied,
    );
    let Weighted {
        rounds,
        limit,
        interval_ms,
        grants_held,
        weight_seed,
        ..
    } = weighted;
    format!(
        "## 7. Weighted decisions on the permit log\n\nThe sliding log and concurrency keep one member per grant, \
         whatever its permits, so a decision's cost must not grow with the weight. Every log is filled first, then \
         the rows are measured in turn, {rounds} rounds; each row shows its cheapest round.\n\n\
         ### (a) By weight\n\nA limit of {limit} per {interval_ms} ms, never reached: one grant of *k* permits per ms \
         of explicit time after a full interval of them, so the log holds {grants_held} grants and each decision \
         frees the oldest and logs one. Concurrency's leases last the interval and are never released. A log of \
         one-permit grants counts what it holds with `ZCARD`; heavier grants also read the first grant: one command \
         more, whatever the weight.\n\n{by_weight}\
         ### (b) A denied request's wait\n\nEach log is full to its limit (the sum of its grants' permits) and is \
         asked for permit counts spread from 1 to the limit, so the grant whose freeing would admit the request lies \
         anywhere in the log; nothing frees meanwhile. Equal weights: the search's first guess at the rank hits. \
         Mixed weights (seed {weight_seed}): a binary search over ranks, one `ZRANGE` per step.\n\n{denied}"
    )
}

fn cluster_table(cluster: &ClusterScaling) -> String {
    let rows = cluster.rows.iter().map(|row| {
        let shares: Vec<String> = (row.master_shares.iter())
            .map(|share| format!("{:.0}%", share * 100.0))
            .collect();
        let mut cells = vec![row.concurrency.to_string()];
        cells.extend(run_cells(&row.single, false));
        cells.extend(run_cells(&row.cluster, false));
        cells.extend([
            times(row.cluster_to_single),
            two(row.single_micros),
            two(row.cluster_micros),
        ]);
        cells.push(shares.join(" / "));
        cells.extend([row.single_redis_bound, row.cluster_redis_bound].map(|bound| format!("{bound:.0}")));
        cells
    });
    let rows = table(
        "in flight | one Redis /s | p50 ms | p99 ms | cluster /s | p50 ms | p99 ms | cluster / one | Redis µs, one | \
         Redis µs, cluster master | decisions per master | predicted /s, one core | predicted /s, a core per master",
        rows,
    );
    let ClusterScaling {
        masters,
        rounds,
        seconds,
        limit,
        ..
    } = cluster;
    format!(
        "## 8. One Redis against a Redis Cluster\n\nThe Rust client through a bridge in front of one `redis-server`, \
         then through a bridge in front of a Redis Cluster of {masters} masters (no replicas), taking turns, {rounds} \
         runs of {seconds} s each per topology and concurrency; each shows its fastest. The decisions: {limit}. \
         Client, bridges and every Redis share this machine's two cores, so the cluster cannot decide more per \
         second here: what carries over to a cluster with a core per master is Redis's µs per decision on a master \
         and how evenly the decisions spread. The last two columns are that arithmetic, a prediction and not a \
         measurement: one Redis core at its µs per decision, and the cluster bounded by its busiest master.\n\n{rows}"
    )
}
