//! The routes' work in front of a Redis Cluster ([`super::cluster`]): one command routed by its key, a `/pipeline`
//! split by node, a `/multi-exec` on the one node of its slot.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use futures_util::future::join_all;
use redis::{RedisError, RedisResult, Value};
use tokio::time::Instant;

use super::cluster::{self, Cluster, Failed, Redirect, Resend, Target};
use super::json::Words;
use super::profile::Profile;
use super::routing::{self, Combine, Route};
use super::shared_budget;
use super::{BatchResult, Bridge, Failure, Prepared, ReplyBudget, REPLY_TOO_LARGE};

/// The answer to a request whose command failed on the cluster.
fn failure(failed: &Failed) -> Failure {
    let text = failed.text();
    match failed {
        Failed::Reply(_) if text.starts_with(REPLY_TOO_LARGE) => Failure::new(StatusCode::PAYLOAD_TOO_LARGE, text),
        Failed::Reply(_) | Failed::Busy(_) | Failed::Refused(_) => Failure::bad_request(text),
        Failed::Lost { .. } | Failed::Unreachable(_) | Failed::Partial(_) => {
            eprintln!("edgelimit bridge: {text}");
            Failure::new(StatusCode::SERVICE_UNAVAILABLE, text)
        }
    }
}

/// Where a command of route `route` goes first.
fn target(route: Route) -> Target {
    match route {
        Route::Slot(slot) => Target::Slot(slot),
        Route::AnyMaster | Route::EveryMaster(_) => Target::AnyMaster,
    }
}

/// `POST /`: one command; `budget` bounds it and every resend (`retry_budget` in mod.rs).
pub(super) async fn single(
    cluster: &Arc<Cluster>,
    profile: Profile,
    prepared: &Prepared,
    budget: Duration,
) -> Result<Value, Failure> {
    let deadline = Instant::now() + budget;
    let (command, _, words) = prepared;
    let route = routing::route(words).map_err(Failure::bad_request)?;
    cluster.scripts.learn(words);
    let result = match route {
        Route::EveryMaster(combine) => every_master(cluster, profile, command, words, combine, deadline).await,
        route => cluster.run(profile, command, words, target(route), None, deadline).await,
    };
    result.map_err(|failed| failure(&failed))
}

/// A command every master runs (`SCRIPT LOAD`, `FLUSHALL`, …), on all at once: their replies combined, or the first
/// failure.
async fn every_master(
    cluster: &Arc<Cluster>,
    profile: Profile,
    command: &redis::Cmd,
    words: &Words,
    combine: Combine,
    deadline: Instant,
) -> Result<Value, Failed> {
    let masters = cluster.masters(deadline).await?;
    let replies = join_all(
        masters.into_iter().map(|address| cluster.run(profile, command, words, Target::Node(address), None, deadline)),
    )
    .await;
    let count = replies.len();
    let (values, failures): (Vec<_>, Vec<_>) = replies.into_iter().partition(Result::is_ok);
    let values: Vec<Value> = values.into_iter().filter_map(Result::ok).collect();
    if let Some(Err(failed)) = failures.into_iter().next() {
        // Some masters ran it and others were lost or unreachable: a partial write must not be reported as not sent.
        // A refusal or a reply is passed on as it is.
        if values.is_empty() || !matches!(failed, Failed::Lost { .. } | Failed::Unreachable(_)) {
            return Err(failed);
        }
        return Err(Failed::Partial(format!(
            "the command ran on {} of the cluster's {count} masters and failed on the others ({}): it has run in part \
             and is not sent again; run it again once every master is up",
            values.len(),
            failed.text()
        )));
    }
    Ok(match combine {
        Combine::Same => values.into_iter().next().unwrap_or(Value::Nil),
        Combine::Sum => Value::Int(
            values
                .iter()
                .map(|value| match value {
                    Value::Int(n) => *n,
                    _ => 0,
                })
                .fold(0i64, i64::saturating_add),
        ),
        Combine::Concat => Value::Array(
            values
                .into_iter()
                .flat_map(|value| match value {
                    Value::Array(items) => items,
                    other => vec![other],
                })
                .collect(),
        ),
    })
}

/// What became of one item of a node's part of a pipeline.
enum Outcome {
    /// Its result.
    Done(BatchResult),
    /// A reply proved it did not run ([`cluster::resend`]), or it could not be sent: it goes again on its own.
    Again(Option<Redirect>),
}

/// `POST /pipeline`: one pipeline per node, all nodes at once, results in the request's order. A command whose reply
/// proves it did not run (`MOVED`, `ASK`, `TRYAGAIN`, …) goes again on its own, after the others.
pub(super) async fn pipeline(
    cluster: &Arc<Cluster>,
    profile: Profile,
    prepared: &[Prepared],
    budget: Duration,
) -> Vec<BatchResult> {
    let deadline = Instant::now() + budget;
    let mut results: Vec<Option<BatchResult>> = prepared.iter().map(|_| None).collect();
    let mut again: Vec<(usize, Option<Redirect>)> = Vec::new();
    let mut groups: BTreeMap<Arc<str>, Vec<usize>> = BTreeMap::new();
    for (i, (_, _, words)) in prepared.iter().enumerate() {
        cluster.scripts.learn(words);
        let address = match routing::route(words) {
            Err(crossslot) => {
                results[i] = Some(Err(crossslot));
                continue;
            }
            Ok(Route::EveryMaster(_)) => None,
            Ok(route) => cluster.address_of(&target(route)),
        };
        match address {
            Some(address) => groups.entry(address).or_default().push(i),
            None => again.push((i, None)),
        }
    }
    let parts =
        join_all(groups.into_iter().map(|(address, items)| node_part(cluster, profile, prepared, address, items)))
            .await;
    for (i, outcome) in parts.into_iter().flatten() {
        match outcome {
            Outcome::Done(result) => results[i] = Some(result),
            Outcome::Again(redirect) => again.push((i, redirect)),
        }
    }
    again.sort_by_key(|(i, _)| *i);
    // Sent one by one, so not announced to the reply cap (shared_budget.rs): held to it together here as each arrives.
    let mut budget = ReplyBudget::new(cluster.max_reply_bytes());
    for (i, redirect) in again {
        let (command, _, words) = &prepared[i];
        let result = match routing::route(words) {
            Ok(Route::EveryMaster(combine)) => every_master(cluster, profile, command, words, combine, deadline).await,
            Ok(route) => cluster.run(profile, command, words, target(route), redirect, deadline).await,
            Err(crossslot) => Err(Failed::Unreachable(crossslot)),
        };
        results[i] = Some(budget.take(result.map_err(|failed| failed.text())));
    }
    results
        .into_iter()
        .map(|result| result.unwrap_or_else(|| Err("the bridge lost this command's result (a bug)".to_owned())))
        .collect()
}

/// One node's part of a pipeline: `items` (indices into `prepared`) sent to `address` as one pipeline.
async fn node_part(
    cluster: &Arc<Cluster>,
    profile: Profile,
    prepared: &[Prepared],
    address: Arc<str>,
    items: Vec<usize>,
) -> Vec<(usize, Outcome)> {
    let again = |items: Vec<usize>| items.into_iter().map(|i| (i, Outcome::Again(None))).collect();
    let Ok(node) = cluster.node(&address) else {
        return again(items);
    };
    let mut connection = match node.links.connection(profile).await {
        Ok(connection) => connection,
        Err(error) => {
            // Nothing was sent: each command goes again on its own, after the map is read again.
            cluster.unavailable(&node, &address, &error);
            cluster.refresh_soon();
            return again(items);
        }
    };
    let (mut pipe, announced) = shared_budget::pipeline(items.len());
    for &i in &items {
        pipe.add_command(prepared[i].0.clone());
    }
    let replies = pipe.query_async::<Vec<RedisResult<Value>>>(&mut connection).await;
    let replies = match replies.map(|replies| announced.replies(replies)) {
        Ok(replies) if replies.len() == items.len() => replies,
        Ok(_) => {
            let text = format!("redis node {address} answered a pipeline with another number of replies");
            return items.into_iter().map(|i| (i, Outcome::Done(Err(text.clone())))).collect();
        }
        Err(error) => {
            let failed =
                if error.code().is_some() { Failed::Reply(error) } else { cluster.lost(&node, address, error) };
            let text = failed.text();
            return items.into_iter().map(|i| (i, Outcome::Done(Err(text.clone())))).collect();
        }
    };
    items
        .into_iter()
        .zip(replies)
        .map(|(i, reply)| {
            let outcome = match cluster::resend(&reply) {
                None => Outcome::Done(reply.map_err(|error| Failed::Reply(error).text())),
                Some(Resend::Moved { slot, address }) => {
                    cluster.moved(slot, &address);
                    Outcome::Again(Some(Redirect { address: Arc::from(address), asking: false }))
                }
                Some(Resend::Ask { address }) => {
                    Outcome::Again(Some(Redirect { address: Arc::from(address), asking: true }))
                }
                Some(Resend::Wait | Resend::NoScript) => Outcome::Again(None),
            };
            (i, outcome)
        })
        .collect()
}

/// `POST /multi-exec`: the transaction on the master of its one slot (any master when it names no key; `CROSSSLOT`
/// for several). A transaction discarded at `EXEC` for a reason that proves nothing ran (`MOVED`, `ASK`,
/// `TRYAGAIN`) is sent again whole: to the new master after `MOVED`, after a pause otherwise (an `ASK` cannot be
/// followed inside a transaction).
pub(super) async fn transaction(
    bridge: &Bridge,
    cluster: &Arc<Cluster>,
    profile: Profile,
    prepared: &[Prepared],
    budget: Duration,
) -> Result<Vec<BatchResult>, Failure> {
    let deadline = Instant::now() + budget;
    let all_words: Vec<&Words> = prepared.iter().map(|(_, _, words)| words).collect();
    let slot = routing::transaction_slot(&all_words).map_err(Failure::bad_request)?;
    let target = slot.map_or(Target::AnyMaster, Target::Slot);
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("MULTI");
    for (command, _, words) in prepared {
        cluster.scripts.learn(words);
        pipe.add_command(command.clone());
    }
    pipe.cmd("EXEC");
    let mut backoff = cluster::FIRST_BACKOFF;
    let mut redirects = 0;
    loop {
        let Some(address) = cluster.address_of(&target) else {
            cluster.wait_for_map(deadline).await.map_err(|f| failure(&f))?;
            continue;
        };
        let node = cluster.node(&address).map_err(|f| failure(&f))?;
        let mut connection = match node.links.connection(profile).await {
            Ok(connection) => connection,
            Err(error) => {
                cluster.unavailable(&node, &address, &error);
                cluster.reroute(&address, &error, deadline).await.map_err(|f| failure(&f))?;
                continue;
            }
        };
        let replies = match pipe.query_async::<Vec<RedisResult<Value>>>(&mut connection).await {
            Ok(replies) => replies,
            Err(error) if error.code().is_some() => return Err(failure(&Failed::Reply(error))),
            Err(error) => return Err(failure(&cluster.lost(&node, address, error))),
        };
        let Some((error, how)) = discarded_for_now(&replies) else {
            return bridge.transaction_results(replies, prepared.len());
        };
        match how {
            Resend::Moved { slot, address } => {
                cluster.moved(slot, &address);
                redirects += 1;
                if redirects > cluster::MAX_REDIRECTS {
                    return Err(failure(&Failed::Reply(error)));
                }
            }
            // Not at queueing time: a script's NOSCRIPT is its item's error in EXEC's reply.
            Resend::NoScript => return bridge.transaction_results(replies, prepared.len()),
            Resend::Ask { .. } | Resend::Wait => {
                if !cluster::pause(&mut backoff, deadline).await {
                    return Err(failure(&Failed::Busy(error)));
                }
            }
        }
    }
}

/// The reason Redis discarded a transaction when it proves nothing ran and may pass ([`cluster::resend`]), at `EXEC`
/// or for every refused command; `None` when the replies are the answer.
fn discarded_for_now(replies: &[RedisResult<Value>]) -> Option<(RedisError, Resend)> {
    let (exec, queued) = replies.split_last()?;
    let exec_error = exec.as_ref().err()?;
    if let Some(how) = cluster::resend(exec) {
        return Some((exec_error.clone(), how));
    }
    if exec_error.code() != Some("EXECABORT") {
        return None;
    }
    // MULTI's reply first, then one per command: every refusal must be one that passes.
    let refused: Vec<&RedisResult<Value>> = queued.iter().skip(1).filter(|reply| reply.is_err()).collect();
    let first = refused.first()?;
    let how = cluster::resend(first)?;
    if refused.iter().any(|reply| cluster::resend(reply).is_none()) {
        return None;
    }
    Some((first.as_ref().err()?.clone(), how))
}

#[cfg(test)]
mod tests {
    use super::super::json;
    use super::*;

    fn reply(text: &str) -> RedisResult<Value> {
        json::top_level_error(redis::parse_redis_value(text.as_bytes()).unwrap())
    }

    #[test]
    fn a_transaction_is_sent_again_only_when_every_refusal_proves_nothing_ran() {
        let ok = reply("+OK\r\n");
        let queued = reply("+QUEUED\r\n");
        let moved = reply("-MOVED 1 127.0.0.1:7001\r\n");
        let abort = reply("-EXECABORT Transaction discarded because of previous errors.\r\n");
        let wrong = reply("-ERR wrong number of arguments\r\n");
        let ran = reply("*1\r\n:1\r\n");
        assert!(matches!(
            discarded_for_now(&[ok.clone(), moved.clone(), moved.clone(), abort.clone()]),
            Some((_, Resend::Moved { slot: 1, .. }))
        ));
        assert!(discarded_for_now(&[ok.clone(), moved.clone(), wrong, abort.clone()]).is_none());
        assert!(discarded_for_now(&[ok.clone(), queued.clone(), ran]).is_none());
        let exec_tryagain = reply("-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
        assert!(matches!(discarded_for_now(&[ok, queued, exec_tryagain]), Some((_, Resend::Wait))));
        assert!(discarded_for_now(&[]).is_none());
    }
}
