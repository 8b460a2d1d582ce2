//! The Redisson layout against real Redisson: Java's `RRateLimiter` (tests/java/RedissonDriver, for every version in
//! tests/java/redisson-versions) and edgelimit's `RedissonLimiter` on one real Redis, edgelimit through the real bridge.
//!
//! The Java program is built once per test run (Maven gives the classpath, offline once scripts/setup fetched the
//! jars; javac compiles the driver). Without `java`, `javac` or `mvn` every test here is skipped with a message that
//! says how to install them. Java talks to Redis directly, as a Java service would.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use edgelimit::{Command, Mode, Rate, RedissonLimiter, RestClient};
use edgelimit_tests::Stack;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

const VERSIONS: &str = include_str!("../java/redisson-versions");
const JAVA_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/java");

/// The driver compiled against one Redisson version.
struct Build {
    version: String,
    classpath: String,
}

/// Every version's build, once per test run; `None` when Java or Maven is missing (the tests then skip).
fn builds() -> Option<&'static [Build]> {
    static BUILDS: OnceLock<Option<Vec<Build>>> = OnceLock::new();
    BUILDS.get_or_init(build_all).as_deref()
}

fn have(tool: &str) -> bool {
    std::process::Command::new(tool).arg("-version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

fn build_all() -> Option<Vec<Build>> {
    let missing: Vec<&str> = ["java", "javac", "mvn"].into_iter().filter(|tool| !have(tool)).collect();
    if !missing.is_empty() {
        eprintln!(
            "SKIPPED: the Redisson interop tests need Java 17+ and Maven ({} not found). Install them with \
             scripts/setup (Debian: apt-get install openjdk-17-jdk-headless maven), then run \
             `cargo test -p edgelimit-tests --test redisson_java`.",
            missing.join(", ")
        );
        return None;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("redisson-java-{}", std::process::id()));
    let builds = VERSIONS
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|version| build(version, &out.join(version)))
        .collect();
    Some(builds)
}

/// Asks Maven for the classpath of `version` (offline first: scripts/setup fetched it; online when it did not) and
/// compiles the driver against it.
fn build(version: &str, dir: &Path) -> Build {
    std::fs::create_dir_all(dir).unwrap();
    let cp_file = dir.join("classpath.txt");
    let maven = |offline: bool| {
        let mut command = std::process::Command::new("mvn");
        command.args(["-q", "-B", "-f", &format!("{JAVA_DIR}/pom.xml")]);
        if offline {
            command.arg("-o");
        }
        command
            .arg(format!("-Dredisson.version={version}"))
            .arg("dependency:build-classpath")
            .arg(format!("-Dmdep.outputFile={}", cp_file.display()))
            .output()
            .expect("run mvn")
    };
    let mut fetched = maven(true);
    if !fetched.status.success() {
        fetched = maven(false);
    }
    assert!(
        fetched.status.success(),
        "mvn could not resolve Redisson {version} (run scripts/setup once online):\n{}{}",
        String::from_utf8_lossy(&fetched.stdout),
        String::from_utf8_lossy(&fetched.stderr)
    );
    let jars = std::fs::read_to_string(&cp_file).unwrap();
    let classes = dir.join("classes");
    let compiled = std::process::Command::new("javac")
        .args(["-nowarn", "-cp", jars.trim(), "-d"])
        .arg(&classes)
        .arg(format!("{JAVA_DIR}/src/main/java/edgelimit/RedissonDriver.java"))
        .output()
        .expect("run javac");
    assert!(
        compiled.status.success(),
        "javac failed for Redisson {version}:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    Build { version: version.to_owned(), classpath: format!("{}:{}", classes.display(), jars.trim()) }
}

/// One running Java driver: Redisson connected to the stack's Redis.
struct Java {
    version: String,
    id: String,
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

/// libfaketime, where Debian's package installs it (`$LIB` is the dynamic loader's own placeholder for the library
/// directory, e.g. lib/x86_64-linux-gnu).
const LIBFAKETIME: &str = "/usr/$LIB/faketime/libfaketime.so.1";

impl Java {
    async fn start(build: &Build, stack: &Stack) -> Java {
        Java::start_with(build, stack, None).await
    }

    /// With `faketime`, the JVM runs under libfaketime with that offset (e.g. `+0.05`): Redisson's clock is skewed.
    async fn start_with(build: &Build, stack: &Stack, faketime: Option<&str>) -> Java {
        let mut command = tokio::process::Command::new("java");
        if let Some(offset) = faketime {
            // libfaketime preloaded as the `faketime` wrapper would (`faketime -f <offset> java`: an offset from the
            // real clock that keeps running), without the wrapper: it makes a named semaphore per process id and
            // fails ("sem_open: File exists") when one left by a killed run has the same id, and this test kills
            // it; the library itself goes on without its shared state when such a one is in the way. (Not faking the
            // monotonic clock, FAKETIME_DONT_FAKE_MONOTONIC, would make every clock call of the JVM a system call: 50
            // times slower.)
            command.env("LD_PRELOAD", LIBFAKETIME).env("FAKETIME", offset);
        }
        command
            .args(["-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", &build.classpath])
            .arg("edgelimit.RedissonDriver")
            .arg(stack.redis_url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("start the Java driver");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
            .await
            .expect("the Java driver starts within 60 s")
            .unwrap()
            .expect("the Java driver printed its ready line");
        let id = ready.strip_prefix("ready ").expect("ready <id>").to_owned();
        Java { version: build.version.clone(), id, _child: child, stdin, stdout }
    }

    /// Sends one command; `Ok(value)` for `ok value`, `Err(message)` for `err message`.
    async fn call(&mut self, line: &str) -> Result<String, String> {
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(30), self.stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("Redisson {}: no reply to {line}", self.version))
            .unwrap()
            .unwrap_or_else(|| panic!("Redisson {}: the driver exited on {line}", self.version));
        match reply.split_once(' ').unwrap_or((&reply, "")) {
            ("ok", value) => Ok(value.to_owned()),
            ("err", message) => Err(message.to_owned()),
            _ => panic!("Redisson {}: unexpected reply {reply:?} to {line}", self.version),
        }
    }

    /// A command that must succeed (a Lua error inside Redisson's script fails the test).
    async fn ok(&mut self, line: &str) -> String {
        match self.call(line).await {
            Ok(value) => value,
            Err(message) => panic!("Redisson {}: {line}: {message}", self.version),
        }
    }

    async fn flag(&mut self, line: &str) -> bool {
        match self.ok(line).await.as_str() {
            "true" => true,
            "false" => false,
            other => panic!("Redisson {}: {line}: expected true or false, got {other}", self.version),
        }
    }

    async fn number(&mut self, line: &str) -> i64 {
        let text = self.ok(line).await;
        text.parse().unwrap_or_else(|_| panic!("Redisson {}: {line}: expected a number, got {text}", self.version))
    }

    async fn try_acquire(&mut self, name: &str, permits: u32) -> bool {
        self.flag(&format!("tryAcquire {name} {permits}")).await
    }

    async fn available(&mut self, name: &str) -> i64 {
        self.number(&format!("available {name}")).await
    }
}

/// Runs `test` once per Redisson version (skipping when Java is absent), each with a fresh stack and driver.
async fn for_each_version<F, Fut>(test: F)
where
    F: Fn(Stack, Java) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some(builds) = builds() else { return };
    for build in builds {
        let stack = Stack::start().await;
        let java = Java::start(build, &stack).await;
        eprintln!("Redisson {} (client id {})", java.version, java.id);
        test(stack, java).await;
    }
}

fn rate(permits: u32, interval_ms: u64) -> Rate {
    Rate::new(permits, Duration::from_millis(interval_ms)).unwrap()
}

fn edge(stack: &Stack, name: &str) -> RedissonLimiter {
    RedissonLimiter::new(stack.client(), name).unwrap()
}

/// The Redis server's clock, in ms.
async fn server_ms(client: &RestClient) -> u64 {
    let [seconds, micros] = client.command(&Command::new("TIME")).await.unwrap().into_tuple::<2>().unwrap();
    let seconds: u64 = seconds.into_number("seconds").unwrap();
    let micros: u64 = micros.into_number("micros").unwrap();
    seconds * 1000 + micros / 1000
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

#[tokio::test]
async fn config_set_on_either_side_is_read_on_the_other() {
    for_each_version(|stack, mut java| async move {
        // Java sets, edgelimit reads (and cannot take the first set).
        assert!(java.flag("trySetRate j2e overall 5 2000 0").await);
        let limiter = edge(&stack, "j2e");
        let config = limiter.config().await.unwrap().unwrap();
        assert_eq!((config.rate, config.mode), (rate(5, 2000), Mode::Overall));
        assert!(!limiter.try_set_rate(rate(9, 1000), Mode::Overall).await.unwrap());
        assert_eq!(limiter.available_permits().await.unwrap(), 5);

        // edgelimit sets, Java reads (and cannot take the first set).
        let limiter = edge(&stack, "e2j");
        let with_keep_alive = rate(7, 1500).with_keep_alive(Duration::from_secs(60)).unwrap();
        assert!(limiter.try_set_rate(with_keep_alive, Mode::PerClient).await.unwrap());
        assert_eq!(java.ok("config e2j").await, "7 1500 per-client");
        assert!(!java.flag("trySetRate e2j overall 1 1000 0").await);
        assert_eq!(java.available("e2j").await, 7);

        // A replaced rate (setRate on either side) is what the other reads.
        java.ok("setRate e2j overall 3 1000 0").await;
        let config = limiter.config().await.unwrap().unwrap();
        assert_eq!((config.rate, config.mode), (rate(3, 1000), Mode::Overall));
        limiter.set_rate(rate(4, 2000), Mode::Overall).await.unwrap();
        assert_eq!(java.ok("config e2j").await, "4 2000 overall");
    })
    .await;
}

#[tokio::test]
async fn acquisitions_are_counted_on_both_sides() {
    for_each_version(|stack, mut java| async move {
        let limiter = edge(&stack, "both");
        assert!(java.flag("trySetRate both overall 10 60000 0").await);
        assert!(limiter.try_acquire(3).await.unwrap().success);
        assert_eq!(java.available("both").await, 7);
        assert!(java.try_acquire("both", 4).await);
        assert_eq!(limiter.available_permits().await.unwrap(), 3);
        let denied = limiter.try_acquire(4).await.unwrap();
        assert!(!denied.success && denied.remaining == 3, "{denied:?}");
        assert!(!java.try_acquire("both", 4).await);
        assert!(java.try_acquire("both", 2).await);
        assert!(limiter.try_acquire(1).await.unwrap().success);
        assert_eq!(java.available("both").await, 0);
        assert!(!limiter.try_acquire(1).await.unwrap().success);
        assert!(!java.try_acquire("both", 1).await);
    })
    .await;
}

/// Redisson's `release` raises the counter and leaves the grants in the log, where they would free their permits
/// again on expiry: edgelimit rebuilds such a counter from the log, so Java's release frees nothing twice (review:
/// 10 grants in one window of a rate of 5). edgelimit's `release` gives back the newest grants, which both see.
#[tokio::test]
async fn a_release_frees_each_permit_once_on_both_sides() {
    for_each_version(|stack, mut java| async move {
        let limiter = edge(&stack, "give");
        assert!(limiter.try_set_rate(rate(10, 60000), Mode::Overall).await.unwrap());
        for _ in 0..6 {
            assert!(limiter.try_acquire(1).await.unwrap().success);
        }
        assert!(java.try_acquire("give", 1).await);
        assert!(java.try_acquire("give", 1).await);
        // Java gives 3 back: the 8 grants are still logged, so 2 are free, not 5.
        java.ok("release give 3").await;
        assert_eq!(limiter.available_permits().await.unwrap(), 2);
        assert_eq!(java.available("give").await, 2);
        // edgelimit gives 2 back (the newest grants, Java's): both see 4 free.
        assert_eq!(limiter.release(2).await.unwrap(), 2);
        assert_eq!(java.available("give").await, 4);
        // Java's release of more than is in use: still the 6 logged grants hold 6.
        java.ok("release give 100").await;
        assert_eq!(limiter.available_permits().await.unwrap(), 4);
        assert_eq!(java.available("give").await, 4);
        assert!(limiter.try_acquire(4).await.unwrap().success);
        assert!(!java.try_acquire("give", 1).await);
    })
    .await;
}

#[tokio::test]
async fn per_client_budgets_are_shared_under_redissons_client_id() {
    for_each_version(|stack, mut java| async move {
        assert!(java.flag("trySetRate pc per-client 3 60000 0").await);
        // edgelimit with --client-id = Redisson's id spends Java's budget; under its own id, a budget of its own.
        let as_java = edge(&stack, "pc").with_client_id(&java.id);
        let own = edge(&stack, "pc");
        assert!(as_java.try_acquire(2).await.unwrap().success);
        assert_eq!(java.available("pc").await, 1);
        assert!(java.try_acquire("pc", 1).await);
        assert!(!as_java.try_acquire(1).await.unwrap().success);
        assert_eq!(as_java.available_permits().await.unwrap(), 0);
        assert_eq!(own.available_permits().await.unwrap(), 3);
        assert!(own.try_acquire(3).await.unwrap().success);
        assert!(!java.try_acquire("pc", 1).await);
        // The keys are Redisson's: `{pc}:value:<id>` and `{pc}:permits:<id>`.
        let exists = stack
            .client()
            .command(
                &Command::new("EXISTS")
                    .arg(format!("{{pc}}:value:{}", java.id))
                    .arg(format!("{{pc}}:permits:{}", java.id)),
            )
            .await
            .unwrap()
            .into_int()
            .unwrap();
        assert_eq!(exists, 2);
    })
    .await;
}

/// A small deterministic generator (xorshift64*): the interleavings are reproducible from the printed seed.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// The grants the log holds that `seen` does not know yet, with their scores; adds them to `seen`.
async fn new_grants(client: &RestClient, log: &str, seen: &mut HashSet<Vec<u8>>) -> Vec<(u64, u64)> {
    let members = client
        .command(&Command::new("ZRANGE").arg(log).args(["0", "-1", "WITHSCORES"]))
        .await
        .unwrap()
        .into_array()
        .unwrap();
    let mut fresh = Vec::new();
    let mut members = members.into_iter();
    while let (Some(member), Some(score)) = (members.next(), members.next()) {
        let member = member.into_bytes().unwrap();
        let score: u64 = score.into_number("score").unwrap();
        if seen.insert(member.clone()) {
            // struct.pack('Bc0I', #id, id, permits): the permits are the last 4 bytes, little-endian.
            let permits = u32::from_le_bytes(member[member.len() - 4..].try_into().unwrap());
            fresh.push((score, u64::from(permits)));
        }
    }
    fresh
}

/// The most permits granted within any window (t - interval, t], t a grant's time.
fn busiest_window(grants: &[(u64, u64)], interval: u64) -> u64 {
    grants
        .iter()
        .map(|&(t, _)| grants.iter().filter(|(g, _)| *g + interval > t && *g <= t).map(|(_, p)| p).sum())
        .max()
        .unwrap_or(0)
}

/// What one interleaved run granted, by side, and the grants' times (Redis server time: Java runs on this host).
struct Run {
    grants: Vec<(u64, u64)>,
    edge_permits: u64,
    java_permits: u64,
}

/// `attempts` random attempts from both sides on `name` (rate permits per interval), with pauses that cross window
/// ends and, now and then, idle gaps longer than the interval.
async fn interleave(stack: &Stack, java: &mut Java, name: &str, attempts: usize, seed: u64, interval: u64) -> Run {
    let client = stack.client();
    let limiter = edge(stack, name);
    let log = format!("{{{name}}}:permits");
    let mut random = Random(seed);
    let mut seen = HashSet::new();
    let mut run = Run { grants: Vec::new(), edge_permits: 0, java_permits: 0 };
    for _ in 0..attempts {
        let permits = 1 + random.below(3) as u32;
        let granted = if random.below(2) == 0 {
            let before = server_ms(&client).await;
            let granted = java.try_acquire(name, permits).await;
            let after = server_ms(&client).await;
            if granted {
                let fresh = new_grants(&client, &log, &mut seen).await;
                assert_eq!(fresh.len(), 1, "one new grant in the log: {fresh:?}");
                // Redisson scores with the JVM's clock, the same host's as Redis's.
                assert!(
                    (before.saturating_sub(2)..=after + 2).contains(&fresh[0].0),
                    "a Java grant at {} outside [{before}, {after}]",
                    fresh[0].0
                );
                run.grants.extend(fresh);
                run.java_permits += u64::from(permits);
            }
            granted
        } else {
            let decision = limiter.try_acquire(permits).await.unwrap();
            if decision.success {
                let fresh = new_grants(&client, &log, &mut seen).await;
                assert_eq!(fresh.len(), 1, "one new grant in the log: {fresh:?}");
                run.grants.extend(fresh);
                run.edge_permits += u64::from(permits);
            }
            decision.success
        };
        let _ = granted;
        match random.below(40) {
            0 => sleep_ms(interval + interval / 4 + random.below(interval)).await,
            1..=8 => sleep_ms(random.below(interval / 4)).await,
            9 => {
                // A read now and then: it may move the window too.
                if random.below(2) == 0 {
                    java.available(name).await;
                } else {
                    limiter.available_permits().await.unwrap();
                }
            }
            _ => {}
        }
    }
    run.grants.sort();
    run
}

#[tokio::test]
async fn interleaved_random_use_never_exceeds_the_rate_in_any_window() {
    const RATE: u32 = 10;
    const INTERVAL: u64 = 300;
    for_each_version(|stack, mut java| async move {
        assert!(java.flag(&format!("trySetRate mix overall {RATE} {INTERVAL} 0")).await);
        let seed = 0x9E37_79B9_7F4A_7C15 ^ u64::from(std::process::id());
        let run = interleave(&stack, &mut java, "mix", 200, seed, INTERVAL).await;
        let busiest = busiest_window(&run.grants, INTERVAL);
        let span = run.grants.last().unwrap().0 - run.grants[0].0;
        eprintln!(
            "Redisson {}: seed {seed:#x}: {} grants over {span} ms (Java {} permits, edgelimit {}), busiest \
             {INTERVAL} ms window {busiest} of {RATE}",
            java.version,
            run.grants.len(),
            run.java_permits,
            run.edge_permits
        );
        assert!(run.java_permits > 0 && run.edge_permits > 0, "both sides were granted");
        assert!(busiest <= u64::from(RATE), "seed {seed:#x}: {busiest} permits in one window, rate {RATE}");

        // Idle: both sides are back to the full rate after the interval.
        sleep_ms(INTERVAL + 50).await;
        assert_eq!(java.available("mix").await, i64::from(RATE), "Java after idle");
        assert_eq!(edge(&stack, "mix").available_permits().await.unwrap(), u64::from(RATE));
        assert!(java.try_acquire("mix", RATE).await);
        assert!(!edge(&stack, "mix").try_acquire(1).await.unwrap().success);
    })
    .await;
}

/// The over-admission: one side acquires, reads after the interval, the other takes the full rate; a
/// lifetime of one side's (edgelimit's former 2-interval TTL) must not drop the other's grants while they are in the
/// window. Both directions. Times are counted from the grants; a check that a loaded machine ran so late that the
/// grants had left the window anyway proves nothing, and the scenario runs again (at most 3 times).
#[tokio::test]
async fn idle_recovery_never_forgets_grants_in_the_window() {
    for_each_version(|stack, mut java| async move {
        for java_first in [false, true] {
            let mut attempt = 0;
            while let Err(late) = forget_scenario(&stack, &mut java, java_first, attempt).await {
                attempt += 1;
                assert!(attempt < 3, "Redisson {}: 3 inconclusive runs: {late}", java.version);
                eprintln!("Redisson {}: inconclusive, again: {late}", java.version);
            }
        }
    })
    .await;
}

/// One side takes 1, reads the full rate back after the interval, the other takes the full rate 1.5 intervals
/// after the first grant; at 2 intervals (+50 ms) neither may take more. `Err` when a check ran too late to tell.
async fn forget_scenario(stack: &Stack, java: &mut Java, java_first: bool, attempt: u32) -> Result<(), String> {
    const INTERVAL: u64 = 1000;
    let name = format!("idle-{java_first}-{attempt}");
    let client = stack.client();
    let limiter = edge(stack, &name);
    let log = format!("{{{name}}}:permits");
    assert!(limiter.try_set_rate(rate(5, INTERVAL), Mode::Overall).await.unwrap());
    if java_first {
        assert!(java.try_acquire(&name, 1).await);
    } else {
        assert!(limiter.try_acquire(1).await.unwrap().success);
    }
    let first = Instant::now();
    sleep_until(first, INTERVAL + 50).await;
    let read = if java_first { java.available(&name).await } else { limiter.available_permits().await.unwrap() as i64 };
    assert_eq!(read, 5, "the first grant left the window");
    sleep_until(first, INTERVAL + INTERVAL / 2).await;
    if java_first {
        assert!(limiter.try_acquire(5).await.unwrap().success);
    } else {
        assert!(java.try_acquire(&name, 5).await);
    }
    let second = Instant::now();
    let mut seen = HashSet::new();
    let [(score, _)] = new_grants(&client, &log, &mut seen).await[..] else {
        panic!("one grant in the log");
    };
    // Past 2 intervals after the first grant, the second side's 5 are still in the window.
    sleep_until(first, 2 * INTERVAL + 50).await;
    for (who, granted) in
        [("Java", java.try_acquire(&name, 1).await), ("edgelimit", limiter.try_acquire(1).await.unwrap().success)]
    {
        let now = server_ms(&client).await;
        if granted && now < score + INTERVAL {
            panic!(
                "{who} over-admitted: granted {} ms after the full rate was taken, within the {INTERVAL} ms interval",
                now - score
            );
        }
        if granted {
            return Err(format!("{who}'s check ran {} ms after the grant it tested", now - score));
        }
    }
    sleep_until(second, INTERVAL + 50).await;
    assert_eq!(java.available(&name).await, 5);
    assert_eq!(limiter.available_permits().await.unwrap(), 5);
    Ok(())
}

/// Sleeps until `ms` after `since`.
async fn sleep_until(since: Instant, ms: u64) {
    tokio::time::sleep_until((since + Duration::from_millis(ms)).into()).await;
}

/// The stuck limiter: after interleaved use and a long idle, both sides see the full rate again, whichever
/// side comes back first, and take it.
#[tokio::test]
async fn after_busy_interleaving_and_idle_both_sides_get_the_full_rate_back() {
    const RATE: u32 = 10;
    const INTERVAL: u64 = 300;
    for_each_version(|stack, mut java| async move {
        for (round, java_first) in [(0u64, true), (1, false), (2, true), (3, false)] {
            let name = format!("stuck{round}");
            assert!(java.flag(&format!("trySetRate {name} overall {RATE} {INTERVAL} 0")).await);
            interleave(&stack, &mut java, &name, 60, 0xC0FFEE + round, INTERVAL).await;
            sleep_ms(2 * INTERVAL + INTERVAL / 2).await;
            let limiter = edge(&stack, &name);
            let (java_sees, edge_sees) = if java_first {
                let java_sees = java.available(&name).await;
                (java_sees, limiter.available_permits().await.unwrap())
            } else {
                let edge_sees = limiter.available_permits().await.unwrap();
                (java.available(&name).await, edge_sees)
            };
            eprintln!(
                "Redisson {} round {round} ({} first): after {} ms idle Java sees {java_sees}, edgelimit {edge_sees}",
                java.version,
                if java_first { "Java" } else { "edgelimit" },
                2 * INTERVAL + INTERVAL / 2
            );
            assert_eq!((java_sees, edge_sees), (i64::from(RATE), u64::from(RATE)));
            if java_first {
                assert!(java.try_acquire(&name, RATE).await);
            } else {
                assert!(limiter.try_acquire(RATE).await.unwrap().success);
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_keep_state_update_is_seen_by_java_never_negative() {
    for_each_version(|stack, mut java| async move {
        let limiter = edge(&stack, "keep");
        assert!(limiter.try_set_rate(rate(10, 60000), Mode::Overall).await.unwrap());
        assert!(java.try_acquire("keep", 8).await);
        // Lowering below what is in use: nothing left, and Java reads 0, not -3.
        assert!(limiter.update_rate(rate(5, 60000), Mode::Overall).await.unwrap());
        assert_eq!(java.available("keep").await, 0);
        assert!(!java.try_acquire("keep", 1).await);
        assert_eq!(java.ok("config keep").await, "5 60000 overall");
        // Raising keeps the 8 in use (what the lowering held back from the log too).
        assert!(limiter.update_rate(rate(12, 60000), Mode::Overall).await.unwrap());
        assert_eq!(java.available("keep").await, 4);
        assert!(java.try_acquire("keep", 4).await);
        assert!(!limiter.try_acquire(1).await.unwrap().success);

        // updateRate (Redisson 4) and edgelimit's keep-state update: only a limiter that exists, creating nothing.
        let none = edge(&stack, "keep-none");
        assert!(!none.update_rate(rate(5, 1000), Mode::Overall).await.unwrap());
        if java.version.starts_with("4.") {
            assert!(!java.flag("updateRate keep-none overall 5 1000 0 1").await);
            // Java's keep-state update is seen by edgelimit: 4 + 4 + 4 in use, the rate now 15.
            assert!(java.flag("updateRate keep overall 15 60000 0 1").await);
            assert_eq!(limiter.available_permits().await.unwrap(), 3);
        }
        assert_eq!(none.config().await.unwrap(), None);
        // Releasing 0 is a no-op on both sides.
        java.ok("release keep 0").await;
        assert_eq!(limiter.release(0).await.unwrap(), 0);
        assert_eq!(java.available("keep").await, limiter.available_permits().await.unwrap() as i64);
    })
    .await;
}

/// The Java host's clock minus the Redis server's, in ms, as Redisson sees it (one `now` between two `TIME`s).
async fn java_skew(stack: &Stack, java: &mut Java) -> i64 {
    let client = stack.client();
    let mut best: Option<(u64, i64)> = None;
    // The tightest of a few brackets.
    for _ in 0..5 {
        let before = server_ms(&client).await;
        let now = java.number("now").await;
        let after = server_ms(&client).await;
        let skew = now - ((before + after) / 2) as i64;
        if best.is_none_or(|(width, _)| after - before < width) {
            best = Some((after - before, skew));
        }
    }
    best.unwrap().1
}

/// Redisson scores its grants with the Java host's clock, edgelimit with the Redis server's. With the JVM's clock
/// skewed by ±50 ms (libfaketime), each side forgets the other's grants |skew| ms early, once a window: what mixing
/// over-admits, in any window of the interval by the server's clock, is at most what the other side was granted
/// within |skew| ms of that window's start (about rate × |skew| / interval under steady use, the whole rate at
/// worst, when the other side took it all in that slice). The test measures it and checks that bound per window.
#[tokio::test]
async fn a_skewed_java_clock_over_admits_at_most_what_falls_within_the_skew() {
    const RATE: u32 = 10;
    const INTERVAL: u64 = 200;
    let Some(builds) = builds() else { return };
    if !have_faketime() {
        eprintln!(
            "SKIPPED: the clock-skew test runs the JVM under libfaketime: install it with scripts/setup (Debian: \
             apt-get install faketime)."
        );
        return;
    }
    for build in builds {
        for offset in ["+0.05", "-0.05"] {
            let stack = Stack::start().await;
            let mut java = Java::start_with(build, &stack, Some(offset)).await;
            let skew = java_skew(&stack, &mut java).await;
            assert!((35..=65).contains(&skew.abs()), "faketime {offset} gave a skew of {skew} ms");
            let name = "skew";
            assert!(java.flag(&format!("trySetRate {name} overall {RATE} {INTERVAL} 0")).await);
            let client = stack.client();
            let limiter = edge(&stack, name);
            let log = format!("{{{name}}}:permits");
            let mut random = Random(0x5EED ^ skew.unsigned_abs());
            let mut seen = HashSet::new();
            // (server time, permits, granted by Java)
            let mut grants: Vec<(u64, u64, bool)> = Vec::new();
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(15 * INTERVAL) {
                let permits = 1 + random.below(2) as u32;
                let by_java = random.below(2) == 0;
                // A few attempts in a row from one side, so both sides take from the same windows.
                let attempts = 1 + random.below(4);
                let granted = if by_java {
                    let burst = java.ok(&format!("burst {name} {permits} {attempts}")).await;
                    !burst.starts_with("0 ")
                } else {
                    let mut granted = false;
                    for _ in 0..attempts {
                        granted |= limiter.try_acquire(permits).await.unwrap().success;
                    }
                    granted
                };
                if granted {
                    for (score, permits) in new_grants(&client, &log, &mut seen).await {
                        // A Java grant's score is its clock: the server's time is the score less the skew.
                        let at = if by_java { (score as i64 - skew) as u64 } else { score };
                        grants.push((at, permits, by_java));
                    }
                }
            }
            grants.sort();
            let tolerance = 3; // the skew's measurement, and ms rounding on both sides
            let (mut worst, mut windows_over) = (0u64, 0usize);
            for &(t, _, _) in &grants {
                let window: Vec<_> = grants.iter().filter(|(g, _, _)| *g + INTERVAL > t && *g <= t).collect();
                let total: u64 = window.iter().map(|(_, p, _)| p).sum();
                let excess = total.saturating_sub(u64::from(RATE));
                if excess > 0 {
                    windows_over += 1;
                    let slice_end = t - INTERVAL + skew.unsigned_abs() + tolerance;
                    let in_slice: u64 = window.iter().filter(|(g, _, _)| *g <= slice_end).map(|(_, p, _)| p).sum();
                    assert!(
                        excess <= in_slice,
                        "Redisson {} skew {skew} ms: {total} permits in the window ending {t}, more than the rate \
                         plus the {in_slice} granted within the skew of its start",
                        build.version
                    );
                }
                worst = worst.max(excess);
            }
            eprintln!(
                "Redisson {} clock skew {skew:+} ms (faketime {offset}): {} grants over {} ms, rate {RATE} per \
                 {INTERVAL} ms: worst excess {worst} permit(s) in one window; {windows_over} of {} windows over \
                 the rate",
                build.version,
                grants.len(),
                grants.last().map_or(0, |g| g.0) - grants.first().map_or(0, |g| g.0),
                grants.len()
            );
        }
    }
}

/// Whether libfaketime preloads (the dynamic loader says on stderr when it cannot, and goes on without it).
fn have_faketime() -> bool {
    std::process::Command::new("true")
        .env("LD_PRELOAD", LIBFAKETIME)
        .env("FAKETIME", "+0")
        .output()
        .is_ok_and(|output| output.status.success() && output.stderr.is_empty())
}
