//! How limit requests become one script call and its reply checked [`Decisions`]. One request with its quota in
//! code runs its algorithm's script (`edgelimit scripts <algorithm>`); anything else runs the driver (`limits`).

use super::{stored_copy, Decisions, LimitRequest, Limiter, Quota};
use crate::decision::{Decision, ScriptReply, Status, REPLY_FIELDS};
use crate::error::{Error, Result};
use crate::lua;
use crate::receipt::{self, Receipt};
use crate::rest::{Command, MergeableDecision, RestClient, Script, ScriptCall};
use crate::value::Value;

/// What a script call does (the driver's ARGV[1]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operation {
    Limit,
    Peek,
    Refund,
}

impl Operation {
    pub(super) fn word(self) -> &'static str {
        match self {
            Operation::Limit => "limit",
            Operation::Peek => "peek",
            Operation::Refund => "refund",
        }
    }
}

/// Entries of a single-limit script's reply: status code, remaining, reset, and the grant's mark or retry_after.
const SINGLE_REPLY_FIELDS: usize = 4;

/// One script call deciding some requests: its keys and arguments. One request with its quota in code runs its
/// algorithm's single-limit script (one key, few arguments); anything else the driver (two keys and six arguments
/// per request).
pub(super) struct Batch<'a> {
    operation: Operation,
    requests: Vec<LimitRequest<'a>>,
    script: &'static Script,
    keys: Vec<String>,
    /// The driver's ARGV from index 2 on, or the single-limit script's request and lease; each request's last argument
    /// is its grant id or receipt (or '').
    args: Vec<String>,
    /// Whether this runs a single-limit script.
    single: bool,
    /// Each request's quota as sent: in code, a stored quota's copy, or `None` for one the script reads.
    quotas: Vec<Option<Quota>>,
}

impl<'a> Batch<'a> {
    pub(super) fn new(operation: Operation, requests: &[LimitRequest<'a>]) -> Result<Batch<'a>> {
        let first = requests
            .first()
            .ok_or_else(|| Error::InvalidArgument("no limits to decide: pass at least one request".into()))?;
        // A single-limit script knows its algorithm and reads no config: it takes neither the config key nor the name.
        let quotas: Vec<Option<Quota>> = requests.iter().map(|request| request.limiter.quota_to_send()).collect();
        let (script, single) = match (requests, quotas[0]) {
            ([_], Some(quota)) => (quota.algorithm().script(), true),
            _ => (&lua::LIMITS, false),
        };
        let mut keys = Vec::with_capacity(2 * requests.len());
        let mut args = Vec::with_capacity(6 * requests.len());
        for (request, &quota) in requests.iter().zip(&quotas) {
            let limiter = request.limiter;
            if limiter.now_ms != first.limiter.now_ms {
                return Err(Error::InvalidArgument(
                    "limits decided together must all use the server's clock or the same explicit time".into(),
                ));
            }
            limiter.check_permits(request.permits).map_err(|error| match (operation, error) {
                // A refund's permits are its receipt's: more than the limit is a receipt no grant returned.
                (Operation::Refund, Error::PermitsExceedRate { permits, rate }) => Error::InvalidArgument(format!(
                    "invalid receipt: it names {permits} permits, more than the limit {rate}, which no grant of \
                         this limit takes"
                )),
                (_, error) => error,
            })?;
            let state_key = limiter.state_key(&request.id);
            // The driver decides every limit before it grants any: one state named twice would be granted twice on
            // one reading.
            if keys.iter().skip(1).step_by(2).any(|key| *key == state_key) {
                return Err(Error::InvalidArgument(format!(
                    "one limit and identifier is named twice in the limits decided together (state {state_key}): \
                     decide it once, with the permits summed"
                )));
            }
            if !single {
                // A quota in the arguments names the state key in the config key's place: a call may only name keys
                // of its slot, and in the per-identifier layout the config lives in another.
                keys.push(match quota {
                    Some(_) => state_key.clone(),
                    None => limiter.config_key(),
                });
            }
            keys.push(state_key);
            match (single, quota) {
                // The request and its quota in one argument (lua/limits/single.lua).
                (true, Some(quota)) => args.push(quota.request_argument(request.permits)),
                (_, quota) => {
                    // '' for a stored quota: the script reads the algorithm from the config.
                    args.push(quota.map_or_else(String::new, |quota| quota.algorithm().script_name().to_owned()));
                    args.push(request.permits.to_string());
                    args.extend(match quota {
                        Some(quota) => {
                            [quota.limit().to_string(), quota.interval_ms().to_string(), quota.rate().to_string()]
                        }
                        None => [String::new(), String::new(), String::new()],
                    });
                }
            }
            // A grant logged as zset members needs a fresh id to name them, which its receipt carries.
            let names_grant =
                operation == Operation::Limit && quota.is_none_or(|quota| quota.algorithm().names_grants());
            args.push(if names_grant { receipt::fresh_grant_id() } else { String::new() });
        }
        Ok(Batch { operation, requests: requests.to_vec(), script, keys, args, single, quotas })
    }

    /// The refund of the grant `receipt` names, under `request`'s limiter and identifier.
    pub(super) fn refund(request: LimitRequest<'a>, receipt: &Receipt) -> Result<Batch<'a>> {
        let request = LimitRequest { permits: receipt.permits(), ..request };
        let mut batch = Batch::new(Operation::Refund, &[request])?;
        // The request's last argument: the receipt (lua/limits/prelude.lua).
        *batch.args.last_mut().expect("a request has arguments") = receipt.to_string();
        Ok(batch)
    }

    pub(super) fn call(&self) -> ScriptCall<'_> {
        let time = self.requests[0].limiter.now_ms.map(|ms| ms.to_string()).unwrap_or_default();
        let args = if !self.single {
            let mut args = vec![self.operation.word().to_owned(), time];
            args.extend(self.args.iter().cloned());
            args
        } else if self.operation != Operation::Limit || !time.is_empty() {
            let mut args = self.args.clone();
            args.extend([self.operation.word().to_owned(), time]);
            args
        } else {
            // The common call: server clock and `limit` are the defaults, so they are left out, and the lease when
            // it is '' (every argument costs Redis).
            let lease = self.args.len() - 1;
            self.args[..lease + usize::from(!self.args[lease].is_empty())].to_vec()
        };
        ScriptCall { script: self.script, keys: self.keys.clone(), args }
    }

    /// Runs the call. Requests that sent a stored quota's copy re-read their config in the same round trip.
    pub(super) async fn run(&self) -> Result<Decisions> {
        let call = self.call();
        let client = &self.requests[0].limiter.client;
        let copies: Vec<(&Limiter, Quota)> = (self.requests.iter().zip(&self.quotas))
            .filter(|(request, _)| stored_copy::uses_copy(request.limiter))
            .filter_map(|(request, quota)| Some((request.limiter, (*quota)?)))
            .collect();
        if copies.is_empty() {
            return self.decode(self.send(call, client).await?);
        }
        crate::rare_paths::out_of_line(self.run_reading_copies(call, client, copies)).await
    }

    /// [`run`](Batch::run) for requests that sent stored quotas' copies: the configs read after the script.
    async fn run_reading_copies(
        &self,
        call: ScriptCall<'_>,
        client: &RestClient,
        copies: Vec<(&Limiter, Quota)>,
    ) -> Result<Decisions> {
        let reads: Vec<Command> = copies.iter().map(|(limiter, _)| stored_copy::read_command(limiter)).collect();
        let (decided, read) = call.script.run_then(client, &call.keys, &call.args, &reads).await?;
        for ((limiter, used), read) in copies.iter().zip(read) {
            limiter.stored_copy.check(*used, read);
        }
        self.decode(decided?)
    }

    /// Runs `call` on `client`. The common call (one limit in code, on the server's clock) may share one batch script
    /// call with other callers' (`src/rest/coalesce.rs`).
    async fn send(&self, call: ScriptCall<'_>, client: &RestClient) -> Result<Value> {
        let common = self.single && self.operation == Operation::Limit && self.requests[0].limiter.now_ms.is_none();
        if let Some(algorithm) = self.quotas[0].filter(|_| common).map(|quota| quota.algorithm()) {
            let [key] = <[String; 1]>::try_from(call.keys).expect("a single-limit call has one key");
            let decision = MergeableDecision {
                alone: algorithm.script(),
                batch: algorithm.batch_script(),
                key,
                args: call.args,
                names_grants: algorithm.names_grants(),
            };
            return client.decide(decision).await;
        }
        call.script.run(client, &call.keys, &call.args).await
    }

    /// A single-limit script's reply, `{status, remaining, reset, x}`, as a [`ScriptReply`]: the limit is the quota's,
    /// and a grant's receipt is made from its mark `x` (with the grant id for a log).
    fn single_reply(&self, reply: Value) -> Result<ScriptReply> {
        let request = &self.requests[0];
        let quota = self.quotas[0].expect("a single-limit script runs a quota sent with it");
        let [status, remaining, reset, x] = reply.into_tuple::<SINGLE_REPLY_FIELDS>()?;
        let x = x.into_u64()?;
        let status = match status.into_u64()? {
            0 => Status::Denied,
            1 => Status::Granted,
            2 => Status::Allowed,
            3 => Status::Refunded,
            4 => Status::NotHeld,
            5 => Status::ExceedsLimit,
            other => return Err(Error::malformed("a status code from 0 to 5", other)),
        };
        let (retry_after, receipt) = match status {
            Status::Granted if quota.algorithm().names_grants() => {
                (0, format!("{}:{}", request.permits, receipt::log_mark(x, &self.args[1])))
            }
            Status::Granted => (0, format!("{}:{x}", request.permits)),
            Status::Refunded | Status::NotHeld => (0, String::new()),
            _ => (x, String::new()),
        };
        ScriptReply {
            status,
            limit: u64::from(quota.limit()),
            remaining: remaining.into_u64()?,
            reset: reset.into_u64()?,
            retry_after,
            last: Value::Bytes(receipt.into_bytes()),
        }
        .checked()
    }

    /// The driver's flat reply, six entries per request, as one [`ScriptReply`] each.
    fn driver_replies(&self, reply: Value) -> Result<Vec<ScriptReply>> {
        let entries = reply.into_array()?;
        if entries.len() != REPLY_FIELDS * self.requests.len() {
            return Err(Error::malformed(
                format!("{} entries ({REPLY_FIELDS} per decision)", REPLY_FIELDS * self.requests.len()),
                entries.len(),
            ));
        }
        let mut entries = entries.into_iter();
        (0..self.requests.len())
            .map(|_| {
                let fields: Vec<Value> = entries.by_ref().take(REPLY_FIELDS).collect();
                let fields = <[Value; REPLY_FIELDS]>::try_from(fields)
                    .map_err(|fields| Error::malformed(format!("{REPLY_FIELDS} entries per decision"), fields.len()))?;
                ScriptReply::from_fields(fields)?.checked()
            })
            .collect()
    }

    /// Checks the reply decision by decision (see [`ScriptReply`]); an error status becomes its typed error.
    pub(super) fn decode(&self, reply: Value) -> Result<Decisions> {
        let verdicts = if self.single { vec![self.single_reply(reply)?] } else { self.driver_replies(reply)? };
        let mut success = true;
        let mut decisions = Vec::with_capacity(self.requests.len());
        for (request, verdict) in self.requests.iter().zip(verdicts) {
            // A status of another operation (a `refunded` to a call asking for permits) is malformed, never a grant.
            let allowed = match (self.operation, verdict.status) {
                (Operation::Limit, Status::Granted) | (Operation::Refund, Status::Refunded) => true,
                // A peek's verdict, or one limit of several that would allow when another denies.
                (Operation::Limit | Operation::Peek, Status::Allowed) => {
                    success = false;
                    true
                }
                (Operation::Limit | Operation::Peek, Status::Denied) | (Operation::Refund, Status::NotHeld) => {
                    success = false;
                    false
                }
                (_, Status::ExceedsLimit) => {
                    return Err(Error::PermitsExceedRate { permits: request.permits, rate: verdict.limit })
                }
                (_, Status::NotConfigured) => return Err(Error::NotInitialized { name: request.limiter.name.clone() }),
                (operation, status) => {
                    return Err(Error::malformed(
                        format!("a status a {} call replies", operation.word()),
                        format!("{status:?}"),
                    ))
                }
            };
            let decision = verdict.decision(allowed);
            // A grant, and only a grant, has a receipt, of the permits asked.
            let receipt = match (verdict.status == Status::Granted, verdict.last.into_string()?) {
                (false, text) if text.is_empty() => None,
                (true, text) => Some(
                    text.parse::<Receipt>()
                        .ok()
                        .filter(|receipt| receipt.permits() == request.permits)
                        .ok_or_else(|| Error::malformed("the grant's receipt, of the permits asked", text))?,
                ),
                (false, text) => return Err(Error::malformed("no receipt but a grant's", text)),
            };
            decisions.push(Decision { receipt, ..decision });
        }
        if self.operation == Operation::Peek {
            success = decisions.iter().all(|d| d.success);
        }
        Ok(Decisions { success, decisions })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::limit::Limiter;
    use crate::rest::RestClient;

    const HOUR: Duration = Duration::from_secs(3600);

    fn limiter(quota: Quota) -> Limiter {
        Limiter::new(RestClient::new("http://127.0.0.1:1", "t").unwrap(), "l", quota).unwrap()
    }

    fn text(reply: &str) -> Value {
        Value::Bytes(reply.as_bytes().to_vec())
    }

    #[test]
    fn the_common_call_sends_one_argument_and_the_rest_only_when_not_the_defaults() {
        let bucket = limiter(Quota::token_bucket(10, 5, HOUR).unwrap());
        let limit = Batch::new(Operation::Limit, &[bucket.request("id", 2)]).unwrap();
        assert_eq!(limit.call().args, ["2:10:3600000:5"]);
        let peek = Batch::new(Operation::Peek, &[bucket.request("id", 2)]).unwrap();
        assert_eq!(peek.call().args, ["2:10:3600000:5", "", "peek", ""]);
        let at = bucket.clone().at(7);
        let explicit = Batch::new(Operation::Limit, &[at.request("id", 1)]).unwrap();
        assert_eq!(explicit.call().args, ["1:10:3600000:5", "", "limit", "7"]);
        // A log's grant names itself: the id is the second argument; and no rate without a token bucket or GCRA.
        let log = limiter(Quota::sliding_log(3, HOUR).unwrap());
        let grant = Batch::new(Operation::Limit, &[log.request("id", 1)]).unwrap();
        let args = grant.call().args;
        assert_eq!((args.len(), args[0].as_str(), args[1].len()), (2, "1:3:3600000", 16));
    }

    #[test]
    fn a_single_limit_reply_is_the_scripts_decision_and_anything_else_is_malformed() {
        let window = limiter(Quota::fixed_window(10, HOUR).unwrap());
        let batch = Batch::new(Operation::Limit, &[window.request("id", 2)]).unwrap();
        let window_end = 472_223 * 3_600_000;
        let reply = |numbers: [i64; 4]| Value::Array(numbers.into_iter().map(Value::Int).collect());
        let denied = batch.decode(reply([0, 1, window_end, 1_234])).unwrap();
        let decision = &denied.decisions[0];
        assert!(!denied.success && !decision.success);
        assert_eq!((decision.remaining, decision.reset, decision.retry_after), (1, window_end as u64, 1_234));
        // A grant's mark is its window: the receipt names it.
        let granted = batch.decode(reply([1, 5, window_end, 472_222])).unwrap();
        let decision = &granted.decisions[0];
        assert_eq!((decision.remaining, decision.reset), (5, window_end as u64));
        assert_eq!(decision.receipt.as_ref().unwrap().to_string(), "2:472222");
        // Text (an older release's reply shape), or a status without numbers, is no reply of these scripts.
        for malformed in [text("g1700000000:500000:fw:472222:9"), text(""), reply([7, 0, 0, 0])] {
            assert!(batch.decode(malformed).is_err());
        }
        // And the four numbers of the other replies: a status code from 0 to 5, at most the limit remaining.
        let numbers = |status| Value::Array(vec![Value::Int(status), Value::Int(0), Value::Int(0), Value::Int(0)]);
        assert!(batch.decode(numbers(6)).is_err());
        let plenty = Value::Array(vec![Value::Int(1), Value::Int(11), Value::Int(0), Value::Int(1)]);
        assert!(matches!(batch.decode(plenty).unwrap_err(), Error::MalformedReply { .. }));
        assert!(matches!(batch.decode(numbers(5)).unwrap_err(), Error::PermitsExceedRate { permits: 2, rate: 10 }));
        // A status of another operation: `refunded` or `not_held` to a limit call, a grant to a peek.
        for status in [3, 4] {
            let error = batch.decode(numbers(status)).unwrap_err();
            assert!(matches!(error, Error::MalformedReply { .. }), "{status}: {error}");
        }
        let peek = Batch::new(Operation::Peek, &[window.request("id", 2)]).unwrap();
        for status in [1, 3, 4] {
            let error = peek.decode(numbers(status)).unwrap_err();
            assert!(matches!(error, Error::MalformedReply { .. }), "{status}: {error}");
        }
    }

    #[test]
    fn more_permits_than_a_quota_in_code_allows_are_refused_before_any_io() {
        // Sent to a store that is down, the caller's mistake would meet the failure policy instead of this error.
        let window = limiter(Quota::fixed_window(10, HOUR).unwrap());
        for operation in [Operation::Limit, Operation::Peek] {
            let error = Batch::new(operation, &[window.request("id", 11)]).map(drop).unwrap_err();
            assert!(matches!(error, Error::PermitsExceedRate { permits: 11, rate: 10 }), "{error}");
        }
        let error = Batch::new(Operation::Refund, &[window.request("id", 11)]).map(drop).unwrap_err();
        assert!(matches!(&error, Error::InvalidArgument(m) if m.contains("receipt")), "{error}");
        assert!(Batch::new(Operation::Limit, &[window.request("id", 10)]).is_ok());
    }
}
