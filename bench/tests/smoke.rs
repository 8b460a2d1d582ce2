//! The benchmark harness, run tiny (`--quick`, without Node): every scenario runs and reports numbers of the right
//! shape, and every output file is written and readable. Timings and ratios are never asserted: on a shared 2-core
//! machine they move, and a benchmark's job is to print them, not to judge them.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use edgelimit_bench::contender::ContenderKind;
use edgelimit_bench::latency::RunStats;
use edgelimit_bench::redis_stats::DecisionCost;
use edgelimit_bench::{report, BenchConfig, BenchResults, Scenario};

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn positive(value: f64, what: &str) {
    assert!(value.is_finite() && value > 0.0, "{what}: {value}");
}

fn measured(cost: &DecisionCost, what: &str) {
    positive(cost.micros_per_decision, what);
    assert!(cost.commands_per_decision.is_finite() && cost.commands_per_decision >= 0.0, "{what}: {cost:?}");
    assert!(cost.requests > 0 && cost.granted <= cost.requests, "{what}: {cost:?}");
}

fn ratio(value: Option<f64>, what: &str) {
    if let Some(value) = value {
        positive(value, what);
    }
}

fn run_stats(stats: &RunStats, what: &str) {
    assert!(stats.requests > 0, "{what}: {stats:?}");
    positive(stats.per_second, what);
    positive(stats.p50_ms, what);
    assert!(stats.p99_ms >= stats.p50_ms, "{what}: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_run_measures_every_scenario_and_writes_every_output() {
    let config = BenchConfig {
        checkout: checkout(),
        quick: true,
        scenarios: Scenario::value_variants().to_vec(),
        no_node: true,
        out: report::DEFAULT_OUT.into(),
        progress: false,
    };
    let results = edgelimit_bench::run(&config).await.expect("the quick benchmark runs");

    let cost = results.redis_cost.as_ref().expect("Redis cost measured");
    measured(&cost.floor.command.decision, "INCR command");
    measured(&cost.floor.script.decision, "INCR script");
    assert_eq!(cost.algorithms.len(), 7, "every algorithm, and the Redisson layout");
    for row in &cost.algorithms {
        for (clock, ours) in [("server clock", &row.server_clock), ("explicit time", &row.explicit_time)] {
            let what = format!("{} on the {clock}", row.algorithm);
            measured(&ours.decision, &what);
            assert!(ours.decision.commands_per_decision >= 1.0, "{what}: a script that calls Redis");
            // On the server clock a bucket's key lives only until the bucket would be whole again (a ms after one
            // request, a little longer after the quick workload), so on a loaded machine it may be gone before
            // MEMORY USAGE reads it (seen for both the idle and the busy read); at an explicit time keys live a
            // minute longer, so those reads must find them.
            assert!(
                clock == "server clock" || (ours.bytes_idle > 0 && ours.bytes_busy > 0),
                "{what}: keys left to measure"
            );
        }
        if let Some(peer) = &row.peer {
            measured(&peer.cost.decision, &format!("{} peer", row.algorithm));
        }
        for value in [
            row.ratios.server_clock_to_peer,
            row.ratios.server_clock_to_floor,
            row.ratios.explicit_time_to_floor,
            row.ratios.peer_to_floor,
        ] {
            ratio(value, &row.algorithm);
        }
    }
    let peers: Vec<ContenderKind> =
        cost.algorithms.iter().filter_map(|row| row.peer.as_ref()).map(|peer| peer.kind).collect();
    assert!(peers.contains(&ContenderKind::Upstash) && peers.contains(&ContenderKind::Redisson));

    let scaling = results.scaling.as_ref().expect("scaling measured");
    assert!(scaling.rows.len() >= 2);
    for row in &scaling.rows {
        let what = format!("rate {}", row.rate);
        for cost in [&row.family, &row.redisson_layout, &row.redisson] {
            measured(cost, &what);
        }
        ratio(row.family_to_redisson, &what);
        ratio(row.redisson_layout_to_redisson, &what);
    }

    let throughput = results.throughput.as_ref().expect("throughput measured");
    assert_eq!(throughput.rows.len(), 4, "decisions and PING, 1 and 16 in flight");
    for row in &throughput.rows {
        let what = format!("{} × {}", row.operation, row.concurrency);
        run_stats(&row.bridge, &what);
        run_stats(&row.redis_benchmark, &what);
        ratio(row.bridge_to_direct, &what);
        // The plain HTTP server stands beside PING only.
        assert_eq!(row.plain_http.is_some(), row.operation == "PING", "{what}");
        if let Some(plain) = &row.plain_http {
            run_stats(plain, &what);
            ratio(row.bridge_to_plain_http, &what);
        }
    }
    let load = &throughput.load;
    assert_eq!(load.rows.len(), 4, "decisions and PING, 16 and 64 in flight");
    for row in &load.rows {
        let what = format!("wrk: {} × {}", row.operation, row.concurrency);
        for stats in [&row.bridge, &row.direct, &row.hello_world] {
            run_stats(stats, &what);
        }
        ratio(row.bridge_to_direct, &what);
        ratio(row.bridge_to_hello_world, &what);
        ratio(row.hello_world_to_direct, &what);
    }
    let scoping = &throughput.scoping;
    assert_eq!(scoping.rows.len(), 2, "1 and 16 in flight");
    for row in &scoping.rows {
        let what = format!("scoping × {}", row.concurrency);
        for stats in [&row.admin, &row.limiter_acl_off, &row.limiter_acl_user] {
            run_stats(stats, &what);
        }
        ratio(row.acl_off_to_admin, &what);
        ratio(row.acl_user_to_admin, &what);
    }
    assert!(throughput.npm.is_none(), "no Node asked for");

    let accuracy = results.accuracy.as_ref().expect("accuracy measured");
    assert_eq!(accuracy.boundary_bursts.len(), 12, "seven algorithms (with the Redisson layout), five with a peer");
    for burst in &accuracy.boundary_bursts {
        positive(burst.at_boundary, &burst.algorithm);
        positive(burst.half_interval_after, &burst.algorithm);
    }
    assert_eq!(accuracy.concurrent.rows.len(), 12);
    assert_eq!(accuracy.concurrent.skews_ms.len() as u32, accuracy.concurrent.clients);
    for row in &accuracy.concurrent.rows {
        assert!(row.granted > 0 && row.granted <= row.requests, "{row:?}");
        positive(row.most_in_any_interval, &row.algorithm);
    }
    assert!(results.worker.is_none(), "no Node asked for");

    let weighted = results.weighted.as_ref().expect("weighted decisions measured");
    assert_eq!(weighted.by_weight.len(), 6, "sliding log and concurrency, grants of 1, 1000 and 10^6");
    for row in &weighted.by_weight {
        let what = format!("{}, grants of {}", row.algorithm, row.permits);
        measured(&row.cost, &what);
        assert_eq!(row.cost.granted, row.cost.requests, "{what}: a limit never reached");
        ratio(row.to_one_permit, &what);
    }
    assert_eq!(weighted.denied.len(), 3, "the 10-grant baseline, equal and mixed weights");
    for row in &weighted.denied {
        measured(&row.cost, &row.log);
        assert_eq!(row.cost.granted, 0, "{}: a full log", row.log);
        ratio(row.to_small_log, &row.log);
    }

    let cluster = results.cluster.as_ref().expect("one Redis against a cluster measured");
    assert_eq!(cluster.rows.len(), 2, "16 and 64 in flight");
    for row in &cluster.rows {
        let what = format!("cluster, {} in flight", row.concurrency);
        run_stats(&row.single, &what);
        run_stats(&row.cluster, &what);
        positive(row.single_micros, &what);
        positive(row.cluster_micros, &what);
        assert_eq!(row.master_shares.len(), cluster.masters, "{what}");
        let total: f64 = row.master_shares.iter().sum();
        assert!((total - 1.0).abs() < 1e-9, "{what}: shares {:?}", row.master_shares);
        assert!(row.master_shares.iter().all(|&share| share > 0.0), "{what}: every master decides");
        ratio(row.cluster_to_single, &what);
    }

    let neighbours = results.neighbours.as_ref().expect("neighbours measured");
    assert_eq!(neighbours.rows.len(), 3, "no attacker, bulk pipelines, many small ones");
    for (i, row) in neighbours.rows.iter().enumerate() {
        assert!(row.decisions > 0 && row.timeouts <= row.decisions, "{row:?}");
        assert!(row.max_ms >= row.p99_ms && row.p99_ms >= row.p50_ms, "{row:?}");
        let attacked = row.attacker.iter().sum::<u64>() > 0;
        assert_eq!(attacked, i > 0, "{row:?}");
        ratio(row.p99_to_alone, &row.condition);
    }

    let json = serde_json::to_string(&results).unwrap();
    let back: BenchResults = serde_json::from_str(&json).expect("the results read back");
    assert_eq!(back, results, "JSON round-trips");

    let out = std::env::temp_dir().join(format!("edgelimit-bench-smoke-{}", std::process::id()));
    let written = report::write(&results, &checkout(), &out).expect("outputs written");
    assert!(
        written.iter().all(|path| path.starts_with(&out)),
        "a run outside bench/results leaves the repository's page alone: {written:?}"
    );
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();
    let from_disk: BenchResults = serde_json::from_str(&read("results.json")).unwrap();
    assert_eq!(from_disk, results);
    let markdown = read("results.md");
    for header in [
        "## 1. Redis cost per decision",
        "| algorithm | edgelimit, server clock µs |",
        "## 2. Sliding-log scaling",
        "| grants in the window |",
        "## 3. Throughput and latency",
        "| operation | in flight |",
        "| in flight | admin /s | p50 µs |",
        "## 4. Memory per identifier",
        "## 5. Accuracy: over-admission",
        "| algorithm | contender | requests | granted |",
        "## 7. Weighted decisions on the permit log",
        "| algorithm | permits per grant |",
        "| log | permits held |",
        "## 8. One Redis against a Redis Cluster",
        "| in flight | one Redis /s |",
        "## 9. Neighbours: one token's load against another's decisions",
        "| attacker | victim decisions | p50 ms |",
    ] {
        assert!(markdown.contains(header), "results.md lacks {header:?}");
    }
    let page = read("RESULTS.md");
    assert!(page.contains("## Machine") && page.contains("scripts/bench"));
    std::fs::remove_dir_all(&out).unwrap();
}
