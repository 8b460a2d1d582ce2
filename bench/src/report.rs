//! The outputs: `results.json`, `results.md` (the tables), and the page `bench/RESULTS.md`, rewritten
//! only when the outputs go to `bench/results` (the default); elsewhere the page is `<out>/RESULTS.md`. Their text is
//! `report.md`'s, its placeholders filled with the numbers and tables.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde::Serialize;
use serde_json::Value;

use crate::accuracy::Accuracy;
use crate::cluster::ClusterScaling;
use crate::contender::ContenderKind;
use crate::harness::BenchResults;
use crate::latency::RunStats;
use crate::node::{NpmReport, WorkerReport};
use crate::redis_cost::{Cost, RedisCost};
use crate::redis_stats::DecisionCost;
use crate::scaling::Scaling;
use crate::support::{ratio, Context};
use crate::throughput::{LoadComparison, Scoping, Throughput};
use crate::weighted::Weighted;

/// Where `edgelimit-bench` writes by default, relative to the checkout.
pub const DEFAULT_OUT: &str = "bench/results";

const TEXT: &str = include_str!("report.md");

/// Writes every output of `results`; returns the paths written.
pub fn write(results: &BenchResults, checkout: &Path, out: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).context(format_args!("could not create {}", out.display()))?;
    let json = serde_json::to_string_pretty(results).context("could not serialise the results")?;
    let same = |a: &Path, b: &Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b);
    let page = if same(out, &checkout.join(DEFAULT_OUT)) {
        checkout.join("bench/RESULTS.md")
    } else {
        out.join("RESULTS.md")
    };
    let (machine, tables) = (machine_section(results), tables(results));
    let page_text = text("page", &(), &[("machine", &machine), ("tables", &tables)]);
    let files = [
        (out.join("results.json"), json + "\n"),
        (
            out.join("results.md"),
            format!("# edgelimit benchmark results\n\n{machine}\n\n{tables}\n\n"),
        ),
        (page, page_text + "\n\n"),
    ];
    let mut written = Vec::new();
    for (path, text) in files {
        std::fs::write(&path, text).context(format_args!("could not write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The block `name` of `report.md` (from its `<!-- name -->` line to the next such line, trimmed), each `{key}`
/// replaced by the value of `fields`' field of that name as results.json has it (a string as it is, a number as
/// Rust prints it), or by its value in `more`.
fn text(name: &str, fields: &impl Serialize, more: &[(&str, &str)]) -> String {
    let block = TEXT
        .split_once(&format!("<!-- {name} -->\n"))
        .map_or("", |(_, rest)| rest);
    let mut text = block.split("<!-- ").next().unwrap_or_default().trim_end().to_owned();
    let fields = match serde_json::to_value(fields) {
        Ok(Value::Object(fields)) => fields,
        _ => Default::default(),
    };
    let fields = fields.into_iter().filter_map(|(key, value)| match value {
        Value::String(text) => Some((key, text)),
        Value::Number(n) => Some((
            key,
            n.as_u64()
                .map_or_else(|| n.as_f64().unwrap_or_default().to_string(), |n| n.to_string()),
        )),
        _ => None,
    });
    for (key, value) in fields.chain(more.iter().map(|&(key, value)| (key.to_owned(), value.to_owned()))) {
        text = text.replace(&format!("{{{key}}}"), &value);
    }
    text
}

const QUICK: &str = ", **--quick** (tiny sizes: not numbers to read)";

fn machine_section(results: &BenchResults) -> String {
    let machine = &results.machine;
    let scenarios: Vec<String> = (results.scenarios.iter())
        .filter_map(|scenario| Some(scenario.to_possible_value()?.get_name().to_owned()))
        .collect();
    let quick = if results.quick { QUICK } else { "" };
    let node = if results.node { "" } else { ", without Node" };
    let run = format!(
        "{:.0} s{quick}{node}; scenarios: {}",
        results.seconds,
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
    format!("## Machine\n\n{}", table(" | ", rows))
}

/// Every measured scenario's tables, in the scenarios' numbered order.
fn tables(results: &BenchResults) -> String {
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
    .collect::<Vec<_>>()
    .join("\n\n")
}

/// A Markdown table, `headers` separated by " | ".
fn table(headers: &str, rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let separator = format!("|{}", " --- |".repeat(headers.split(" | ").count()));
    let rows = rows.into_iter().map(|row| format!("| {} |", row.join(" | ")));
    [format!("| {headers} |"), separator]
        .into_iter()
        .chain(rows)
        .collect::<Vec<_>>()
        .join("\n")
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
    let (floor_script, floor_command) = (two(micros(&cost.floor.script)), two(micros(&cost.floor.command)));
    let more = [
        ("floorScript", &floor_script[..]),
        ("floorCommand", &floor_command),
        ("costs", &costs),
    ];
    text("redis-cost", cost, &[&more[..], &[("commands", &commands)]].concat())
}

fn memory_table(cost: &RedisCost) -> String {
    let rows = every_cost(cost).into_iter().map(|(algorithm, kind, cost)| {
        let (idle, busy) = (cost.bytes_idle.to_string(), cost.bytes_busy.to_string());
        vec![algorithm.to_owned(), kind.label().to_owned(), idle, busy]
    });
    let rows = table("algorithm | contender | bytes idle | bytes busy", rows);
    text("memory", &(), &[("rows", &rows)])
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
    text("scaling", scaling, &[("rows", &rows)])
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
    let npm = throughput.npm.as_ref().map(npm_tables);
    let parts = [
        text("throughput", throughput, &[("rows", &rows)]),
        load_table(&throughput.load),
        scoping_table(&throughput.scoping),
    ];
    parts.into_iter().chain(npm).collect::<Vec<_>>().join("\n\n")
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
    text("load", load, &[("rows", &rows)])
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
    text("scoping", scoping, &[("rows", &rows)])
}

fn npm_tables(npm: &NpmReport) -> String {
    let (size, cold, flow) = (&npm.package, &npm.cold_start, &npm.throughput);
    let rows = flow.algorithms.iter().map(|row| {
        let mut cells = vec![row.algorithm.clone()];
        cells.extend(run_cells(&row.edgelimit, false));
        for peer in [&row.upstash_plain, &row.upstash_pipelined] {
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
    let more = [
        ("throughput", &throughput[..]),
        ("coldStarts", &cold_starts),
        ("sizes", &sizes),
    ];
    text("npm", flow, &more)
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
    let rows = concurrent.rows.iter().map(|row| {
        let mut cells = vec![row.algorithm.clone(), row.kind.label().to_owned()];
        cells.extend([row.requests.to_string(), row.granted.to_string()]);
        cells.extend([two(row.most_in_any_interval), two(row.promise)]);
        cells.push(row.grant_times.label().to_owned());
        cells
    });
    let rows = table(
        "algorithm | contender | requests | granted | most in any interval / limit | promise | grant times from",
        rows,
    );
    let skews: Vec<String> = concurrent.skews_ms.iter().map(|skew| format!("{skew:+}")).collect();
    let (limit, interval_ms) = (accuracy.limit.to_string(), accuracy.interval_ms.to_string());
    let more = [
        ("limit", &limit[..]),
        ("intervalMs", &interval_ms),
        ("skews", &skews.join(", ")),
    ];
    text(
        "accuracy",
        concurrent,
        &[&more[..], &[("bursts", &bursts), ("rows", &rows)]].concat(),
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
    text("worker", worker, &[("rows", &rows)])
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
    text("weighted", weighted, &[("byWeight", &by_weight), ("denied", &denied)])
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
    text("cluster", cluster, &[("rows", &rows)])
}
