//! The outputs: `results.json`, `results.md` (the tables) and the page `bench/RESULTS.md` (`<out>/RESULTS.md` when
//! the outputs do not go to `bench/results`): `report.md`'s text, its placeholders filled.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde::Serialize;
use serde_json::Value;

use crate::accuracy::Accuracy;
use crate::cluster::ClusterScaling;
use crate::contender::ContenderKind;
use crate::harness::BenchResults;
use crate::latency::RunStats;
use crate::neighbours::Neighbours;
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
    let page = if same(out, &checkout.join(DEFAULT_OUT)) { checkout.join("bench") } else { out.to_owned() };
    let (machine, tables) = (machine_section(results), tables(results));
    let page_text = text("page", &(), &[("machine", &machine), ("tables", &tables)]);
    let markdown = format!("# edgelimit benchmark results\n\n{machine}\n\n{tables}\n\n");
    let files =
        [("results.json", out, json + "\n"), ("results.md", out, markdown), ("RESULTS.md", &page, page_text + "\n\n")];
    let mut written = Vec::new();
    for (name, dir, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).context(format_args!("could not write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The block `name` of `report.md` (from its `<!-- name -->` line to the next such line, trimmed), each `{key}`
/// replaced by `fields`' field of that name (a string, or a number as Rust prints it) or by its value in `more`.
fn text(name: &str, fields: &impl Serialize, more: &[(&str, &str)]) -> String {
    let block = TEXT.split_once(&format!("<!-- {name} -->\n")).map_or("", |(_, rest)| rest);
    let mut text = block.split("<!-- ").next().unwrap_or_default().trim_end().to_owned();
    let fields = match serde_json::to_value(fields) {
        Ok(Value::Object(fields)) => fields,
        _ => Default::default(),
    };
    let fields = fields.into_iter().filter_map(|(key, value)| match value {
        Value::String(text) => Some((key, text)),
        Value::Number(n) => Some((key, n.as_f64()?.to_string())),
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
    let (seconds, scenarios) = (results.seconds, scenarios.join(", "));
    let quick = if results.quick { QUICK } else { "" };
    let node = if results.node { "" } else { ", without Node" };
    let rows = [
        ("CPU", format!("{} ({} cores)", machine.cpu, machine.cores)),
        ("kernel", machine.kernel.clone()),
        ("redis-server", machine.redis_server.clone()),
        ("node", machine.node.clone().unwrap_or_else(|| "not found".to_owned())),
        ("commit", machine.git_commit.clone()),
        ("date", machine.date.clone()),
        ("run", format!("{seconds:.0} s{quick}{node}; scenarios: {scenarios}")),
    ];
    let rows = rows.map(|(what, value)| format!("{what} | {value}"));
    format!("## Machine\n\n{}", table(" | ", rows))
}

/// Every measured scenario's tables, in the scenarios' numbered order.
fn tables(results: &BenchResults) -> String {
    let tables = [
        results.redis_cost.as_ref().map(redis_cost_tables),
        results.scaling.as_ref().map(scaling_table),
        results.throughput.as_ref().map(throughput_tables),
        results.redis_cost.as_ref().map(memory_table),
        results.accuracy.as_ref().map(accuracy_tables),
        results.worker.as_ref().map(worker_table),
        results.weighted.as_ref().map(weighted_tables),
        results.cluster.as_ref().map(cluster_table),
        results.neighbours.as_ref().map(neighbours_table),
    ];
    tables.into_iter().flatten().collect::<Vec<_>>().join("\n\n")
}

/// A Markdown table, `headers` and each row's cells separated by " | ".
fn table(headers: &str, rows: impl IntoIterator<Item = String>) -> String {
    let separator = format!("|{}", " --- |".repeat(headers.split(" | ").count()));
    let mut lines = vec![format!("| {headers} |"), separator];
    lines.extend(rows.into_iter().map(|row| format!("| {row} |")));
    lines.join("\n")
}

fn two(value: f64) -> String {
    format!("{value:.2}")
}

fn times(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_owned(), |value| format!("{value:.2}×"))
}

/// Requests/s, then p50 and p99 in ms to two places (or, `in_micros`, in µs to one).
fn run_cells(stats: &RunStats, in_micros: bool) -> String {
    let (scale, digits) = if in_micros { (1000.0, 1) } else { (1.0, 2) };
    let (per_second, p50, p99) = (stats.per_second, stats.p50_ms * scale, stats.p99_ms * scale);
    format!("{per_second:.0} | {p50:.digits$} | {p99:.digits$}")
}

fn micros(cost: &Cost) -> String {
    two(cost.decision.micros_per_decision)
}

fn redis_cost_tables(cost: &RedisCost) -> String {
    let rows = cost.algorithms.iter().map(|row| {
        let (peer, peer_us) = match &row.peer {
            Some(peer) => (peer.kind.label(), micros(&peer.cost)),
            None => ("–", "–".to_owned()),
        };
        let (algorithm, r) = (&row.algorithm, &row.ratios);
        let (ours, explicit) = (micros(&row.server_clock), micros(&row.explicit_time));
        let (to_peer, to_floor) = (times(r.server_clock_to_peer), times(r.server_clock_to_floor));
        let (explicit_to_floor, peer_to_floor) = (times(r.explicit_time_to_floor), times(r.peer_to_floor));
        format!(
            "{algorithm} | {ours} | {explicit} | {peer} | {peer_us} | {to_peer} | {to_floor} | {explicit_to_floor} \
                 | {peer_to_floor}"
        )
    });
    let costs = table(
        "algorithm | edgelimit, server clock µs | edgelimit, explicit time µs | peer | peer µs | server clock / peer \
         | server clock / floor | explicit time / floor | peer / floor",
        rows,
    );
    let commands = every_cost(cost).into_iter().map(|(algorithm, kind, cost)| {
        let DecisionCost { commands_per_decision: commands, granted, requests, .. } = cost.decision;
        format!("{algorithm} | {} | {} | {commands:.2} | {granted} of {requests}", kind.label(), micros(cost))
    });
    let commands = table("algorithm | contender | µs/decision | commands/decision | granted", commands);
    let (floor_script, floor_command) = (micros(&cost.floor.script), micros(&cost.floor.command));
    let more = [("floorScript", &floor_script[..]), ("floorCommand", &floor_command)];
    text("redis-cost", cost, &[&more[..], &[("costs", &costs), ("commands", &commands)]].concat())
}

fn memory_table(cost: &RedisCost) -> String {
    let rows = every_cost(cost).into_iter().map(|(algorithm, kind, cost)| {
        let (idle, busy) = (cost.bytes_idle, cost.bytes_busy);
        format!("{algorithm} | {} | {idle} | {busy}", kind.label())
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
        let micros = costs.map(|cost| two(cost.micros_per_decision)).join(" | ");
        let commands = costs.map(|cost| format!("{:.1}", cost.commands_per_decision)).join(" · ");
        let (family, layout) = (times(row.family_to_redisson), times(row.redisson_layout_to_redisson));
        format!("{} | {micros} | {family} | {layout} | {commands}", row.rate)
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
        let (bridge, direct) = (run_cells(&row.bridge, false), run_cells(&row.redis_benchmark, false));
        let plain =
            (row.plain_http.as_ref()).map_or_else(|| "–".to_owned(), |plain| format!("{:.0}", plain.per_second));
        let (to_direct, to_plain) = (times(row.bridge_to_direct), times(row.bridge_to_plain_http));
        let (operation, concurrency) = (&row.operation, row.concurrency);
        format!("{operation} | {concurrency} | {bridge} | {direct} | {to_direct} | {plain} | {to_plain}")
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
        let runs = [&row.bridge, &row.direct, &row.hello_world].map(|stats| run_cells(stats, false));
        let ratios = [row.bridge_to_direct, row.bridge_to_hello_world, row.hello_world_to_direct];
        let (runs, ratios) = (runs.join(" | "), ratios.map(times).join(" | "));
        format!("{} | {} | {runs} | {ratios}", row.operation, row.concurrency)
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
        let (admin, off, user) = (&row.admin, &row.limiter_acl_off, &row.limiter_acl_user);
        let [admin, off, user] = [admin, off, user].map(|stats| run_cells(stats, true));
        let (off_to_admin, user_to_admin) = (times(row.acl_off_to_admin), times(row.acl_user_to_admin));
        format!("{} | {admin} | {off} | {off_to_admin} | {user} | {user_to_admin}", row.concurrency)
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
        let peers = [&row.upstash_plain, &row.upstash_pipelined].map(|peer| {
            format!("{} | {}", run_cells(peer, false), times(ratio(row.edgelimit.per_second, peer.per_second)))
        });
        format!("{} | {} | {}", row.algorithm, run_cells(&row.edgelimit, false), peers.join(" | "))
    });
    let throughput = table(
        "algorithm | edgelimit /s | p50 ms | p99 ms | @upstash, no auto-pipelining /s | p50 ms | p99 ms | edgelimit / \
         @upstash plain | @upstash, auto-pipelining /s | p50 ms | p99 ms | edgelimit / @upstash pipelined",
        rows,
    );
    let (node, node_peer) = (cold.node_edgelimit_ms, cold.node_upstash_ms);
    let (workerd, workerd_peer) = (cold.workerd_edgelimit_ms, cold.workerd_no_limiter_ms);
    let cold_starts = [
        format!(
            "Node: process start → first decision | {node:.1} | {node_peer:.1} | @upstash/ratelimit + @upstash/redis"
        ),
        format!(
            "workerd: new Miniflare → first response | {workerd:.1} | {workerd_peer:.1} | a Worker without a limiter"
        ),
    ];
    let samples = cold.samples;
    let cold_starts = table(
        &format!("cold start to the first decision (median of {samples}) | edgelimit ms | baseline ms | baseline is"),
        cold_starts,
    );
    let sizes = [
        format!("core_bg.wasm | {} | {}", size.wasm_raw, size.wasm_gzip),
        format!("JS (glue, layer, entry points) | {} | {}", size.js_raw, size.js_gzip),
        format!("index.d.ts | {} | –", size.types),
    ];
    let sizes = table("package part | raw bytes | gzip bytes", sizes);
    let more = [("throughput", &throughput[..]), ("coldStarts", &cold_starts)];
    text("npm", flow, &[&more[..], &[("sizes", &sizes)]].concat())
}

fn accuracy_tables(accuracy: &Accuracy) -> String {
    let bursts = accuracy.boundary_bursts.iter().map(|row| {
        let ratios = [row.at_boundary, row.half_interval_after, row.promise].map(two).join(" | ");
        format!("{} | {} | {ratios}", row.algorithm, row.kind.label())
    });
    let bursts =
        table("algorithm | contender | second burst at the boundary | second burst ½ interval later | promise", bursts);
    let concurrent = &accuracy.concurrent;
    let rows = concurrent.rows.iter().map(|row| {
        let (algorithm, kind, clock) = (&row.algorithm, row.kind.label(), row.grant_times.label());
        let (requests, granted, most, promise) = (row.requests, row.granted, row.most_in_any_interval, row.promise);
        format!("{algorithm} | {kind} | {requests} | {granted} | {most:.2} | {promise:.2} | {clock}")
    });
    let rows = table(
        "algorithm | contender | requests | granted | most in any interval / limit | promise | grant times from",
        rows,
    );
    let skews: Vec<String> = concurrent.skews_ms.iter().map(|skew| format!("{skew:+}")).collect();
    let (limit, interval_ms, skews) = (accuracy.limit.to_string(), accuracy.interval_ms.to_string(), skews.join(", "));
    let more = [("limit", &limit[..]), ("intervalMs", &interval_ms), ("skews", &skews)];
    text("accuracy", concurrent, &[&more[..], &[("bursts", &bursts), ("rows", &rows)]].concat())
}

fn worker_table(worker: &WorkerReport) -> String {
    let added = |value: Option<f64>| value.map_or_else(|| "–".to_owned(), |ms| format!("{ms:+.2}"));
    let baseline_cold_start = worker.workers.first().map(|run| run.cold_start_ms);
    let rows = worker.workers.iter().map(|run| {
        let (name, p50, p99, cold) = (&run.name, run.p50_ms, run.p99_ms, run.cold_start_ms);
        let (kib, gzip) = (run.bundle_kib, run.bundle_gzip_kib);
        let (added_p50, added_p99) = (added(run.added_p50_ms), added(run.added_p99_ms));
        let to_baseline = times(baseline_cold_start.map(|baseline| cold / baseline));
        format!(
            "{name} | {p50:.2} | {p99:.2} | {added_p50} | {added_p99} | {cold:.0} | {to_baseline} | {kib:.1} | \
             {gzip:.1}"
        )
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
        let (us, commands, requests) = (cost.micros_per_decision, cost.commands_per_decision, cost.requests);
        format!("{name} | {permits} | {us:.2} | {commands:.2} | {counted} of {requests} | {}", times(to_baseline))
    };
    let by_weight = (weighted.by_weight.iter())
        .map(|row| cells(&row.algorithm, row.permits, &row.cost, row.cost.granted, row.to_one_permit));
    let by_weight = table(
        "algorithm | permits per grant | µs/decision | commands/decision | granted | µs / 1-permit row",
        by_weight,
    );
    let denied = weighted.denied.iter().map(|row| {
        let denied = row.cost.requests - row.cost.granted;
        cells(&row.log, row.permits, &row.cost, denied, row.to_small_log)
    });
    let denied =
        table("log | permits held | µs/denied decision | commands/decision | denied | µs / 10-grant log", denied);
    text("weighted", weighted, &[("byWeight", &by_weight), ("denied", &denied)])
}

fn cluster_table(cluster: &ClusterScaling) -> String {
    let rows = cluster.rows.iter().map(|row| {
        let shares: Vec<String> = (row.master_shares.iter()).map(|share| format!("{:.0}%", share * 100.0)).collect();
        let (single, clustered) = (run_cells(&row.single, false), run_cells(&row.cluster, false));
        let (ratio, one_us, master_us) = (times(row.cluster_to_single), row.single_micros, row.cluster_micros);
        let (one_bound, cluster_bound) = (row.single_redis_bound, row.cluster_redis_bound);
        let shares = shares.join(" / ");
        format!(
            "{} | {single} | {clustered} | {ratio} | {one_us:.2} | {master_us:.2} | {shares} | {one_bound:.0} | \
             {cluster_bound:.0}",
            row.concurrency
        )
    });
    let rows = table(
        "in flight | one Redis /s | p50 ms | p99 ms | cluster /s | p50 ms | p99 ms | cluster / one | Redis µs, one | \
         Redis µs, cluster master | decisions per master | predicted /s, one core | predicted /s, a core per master",
        rows,
    );
    text("cluster", cluster, &[("rows", &rows)])
}

fn neighbours_table(neighbours: &Neighbours) -> String {
    let rows = neighbours.rows.iter().map(|row| {
        let (p50, p99, max, timeouts) = (row.p50_ms, row.p99_ms, row.max_ms, row.timeouts);
        let (to_p50, to_p99) = (times(row.p50_to_alone), times(row.p99_to_alone));
        let [served, refused, failed] = row.attacker;
        format!(
            "{} | {} | {p50:.2} | {p99:.2} | {max:.1} | {timeouts} | {to_p50} | {to_p99} | {served} · {refused} · {failed}",
            row.condition, row.decisions
        )
    });
    let rows = table(
        "attacker | victim decisions | p50 ms | p99 ms | max ms | over 1 s (admitted by the policy) | p50 / alone \
         | p99 / alone | attacker's requests: 200 · 429 · other",
        rows,
    );
    text("neighbours", neighbours, &[("rows", &rows)])
}
