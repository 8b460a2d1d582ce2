//! The memory backend: each limit's [model](super::model) decides in this process, on a clock the caller may set,
//! after the same checks as the Redis path and with the decisions and receipts the scripts give. For users' tests and
//! single-process apps: nothing is shared between processes, and nothing outlives the [`Memory`].

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};

use super::batch::{Batch, Operation};
use super::model::{decide_all, ModelLimit};
use super::{Decisions, LimitRequest, Limiter};
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::identifier::Identifier;
use crate::receipt::Receipt;

/// Where a [`Memory`] reads the time: unix ms, or the error that keeps it from deciding (a clock that gave no time is
/// never taken for one).
pub type Clock = Box<dyn Fn() -> Result<u64> + Send + Sync>;

/// Limits' states held in this process, decided by the model. Every method takes `&self`.
pub struct Memory {
    clock: Clock,
    states: Mutex<States>,
}

impl fmt::Debug for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memory").finish_non_exhaustive()
    }
}

impl Default for Memory {
    /// On the system clock.
    fn default() -> Memory {
        Memory::with_clock(Box::new(|| {
            let since = web_time::SystemTime::now().duration_since(web_time::UNIX_EPOCH);
            since
                .map(|since| since.as_millis() as u64)
                .map_err(|_| Error::InvalidConfig("the system clock is before 1970".into()))
        }))
    }
}

impl Memory {
    /// Decides on `clock` instead of the system's, e.g. one a test moves.
    pub fn with_clock(clock: Clock) -> Memory {
        Memory { clock, states: Mutex::default() }
    }

    /// [`limit_all`](super::limit_all), decided here: all or nothing, a denial consuming nothing.
    pub fn limit_all(&self, requests: &[LimitRequest<'_>]) -> Result<Decisions> {
        self.decide(Operation::Limit, requests)
    }

    /// [`peek_all`](super::peek_all), decided here.
    pub fn peek_all(&self, requests: &[LimitRequest<'_>]) -> Result<Decisions> {
        self.decide(Operation::Peek, requests)
    }

    /// [`refund_all`](super::refund_all), given back here: one result per refund, in order.
    pub fn refund_all(&self, refunds: &[(LimitRequest<'_>, Receipt)]) -> Result<Vec<Result<Decision>>> {
        // Every refund checked before any is given back, as the Redis path builds its calls before sending them.
        for (request, receipt) in refunds {
            Batch::refund(request.clone(), receipt)?;
        }
        let now = (self.clock)()?;
        let refund = |(request, receipt): &(LimitRequest<'_>, Receipt)| {
            self.with_models(std::slice::from_ref(request), now, |models| {
                let given = models[0].refund(now, receipt)?;
                let standing = models[0].decide(now, 1).now;
                Ok(Decision {
                    success: given,
                    limit: models[0].quota().limit().into(),
                    remaining: standing.remaining,
                    reset: standing.reset,
                    retry_after: 0,
                    receipt: None,
                })
            })
        };
        Ok(refunds.iter().map(refund).collect())
    }

    /// Forgets `id`'s state under each of `limiters`. Returns whether any held something.
    pub fn reset(&self, limiters: &[Limiter], id: &Identifier<'_>) -> Result<bool> {
        let now = (self.clock)()?;
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let forgotten: Vec<ModelLimit> =
            (limiters.iter()).filter_map(|limiter| states.by_key.remove(&limiter.state_key(id))).collect();
        Ok(forgotten.into_iter().any(|mut model| !model.is_whole(now)))
    }

    fn decide(&self, operation: Operation, requests: &[LimitRequest<'_>]) -> Result<Decisions> {
        // The checks the Redis path makes before any I/O: the permits, a state named twice, one clock.
        Batch::new(operation, requests)?;
        let now = (self.clock)()?;
        self.with_models(requests, now, |models| {
            let mut entries: Vec<_> = (models.iter_mut().zip(requests))
                .map(|(model, request)| {
                    let logged = model.quota().algorithm().names_grants();
                    (model, request.permits, if logged { crate::unique_id::unguessable_u64() } else { 0 })
                })
                .collect();
            let (verdicts, receipts) = match operation {
                Operation::Limit => decide_all(&mut entries, now),
                _ => (entries.iter_mut().map(|(model, permits, _)| model.decide(now, *permits)).collect(), None),
            };
            let decisions = (verdicts.iter().zip(&entries).enumerate())
                .map(|(i, (verdict, (model, _, _)))| {
                    let standing = if receipts.is_some() { verdict.after } else { verdict.now };
                    Decision {
                        success: verdict.allowed,
                        limit: model.quota().limit().into(),
                        remaining: standing.remaining,
                        reset: standing.reset,
                        retry_after: verdict.retry_after,
                        receipt: receipts.as_ref().map(|receipts| receipts[i]),
                    }
                })
                .collect();
            // A grant, or a peek every limit would grant (decide_all grants when every limit allows).
            Ok(Decisions { success: verdicts.iter().all(|verdict| verdict.allowed), decisions })
        })
    }

    /// Runs `decide` on the models of `requests`' states (fresh for a state not held), each under its request's
    /// quota, then keeps them, whatever `decide` answered.
    fn with_models<T>(
        &self,
        requests: &[LimitRequest<'_>],
        now: u64,
        decide: impl FnOnce(&mut [ModelLimit]) -> Result<T>,
    ) -> Result<T> {
        let quotas = (requests.iter())
            .map(|request| {
                (request.limiter.quota()).ok_or_else(|| {
                    Error::InvalidConfig(format!(
                        "limiter {:?} reads its quota from Redis, which the memory backend has not: give its quota in \
                         code",
                        request.limiter.name()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let keys: Vec<String> = requests.iter().map(|request| request.limiter.state_key(&request.id)).collect();
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let mut models: Vec<ModelLimit> = (keys.iter().zip(&quotas))
            .map(|(key, &quota)| {
                // A whole state is no state: another algorithm may start afresh on it, as on an expired key.
                let held = states.by_key.remove(key).and_then(|mut model| {
                    (model.quota().algorithm() == quota.algorithm() || !model.is_whole(now)).then_some(model)
                });
                held.unwrap_or_else(|| ModelLimit::new(quota))
            })
            .collect();
        let decided = (models.iter_mut().zip(quotas)).try_for_each(|(model, quota)| model.requota(quota));
        let decided = decided.and_then(|()| decide(&mut models));
        states.keep(keys.into_iter().zip(models), now);
        decided
    }
}

/// The models by state key.
#[derive(Default)]
struct States {
    by_key: HashMap<String, ModelLimit>,
    /// Whole states are forgotten when there are this many.
    sweep_at: usize,
}

impl States {
    /// Keeps `models`, first forgetting every whole state once the states have doubled since the last sweep, so that
    /// memory follows the identifiers still limited, not every one ever seen.
    fn keep(&mut self, models: impl IntoIterator<Item = (String, ModelLimit)>, now: u64) {
        if self.by_key.len() >= self.sweep_at {
            self.by_key.retain(|_, model| !model.is_whole(now));
            self.sweep_at = (2 * self.by_key.len()).max(1024);
        }
        self.by_key.extend(models);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::limit::Quota;
    use crate::ratelimit::{Limit, Ratelimit, Reason};

    const T0: u64 = 1_700_000_000_000;

    /// A Ratelimit in memory on a clock the test moves.
    fn in_memory(quotas: &[Quota]) -> (Ratelimit, Arc<AtomicU64>) {
        let now = Arc::new(AtomicU64::new(T0));
        let clock = now.clone();
        let memory = Memory::with_clock(Box::new(move || Ok(clock.load(Ordering::Relaxed))));
        let limits: Vec<Limit> = quotas.iter().map(|&quota| Limit::new(quota)).collect();
        (Ratelimit::in_memory(&limits, memory, "edgelimit").unwrap(), now)
    }

    fn second() -> Duration {
        Duration::from_secs(1)
    }

    #[tokio::test]
    async fn decides_on_its_clock_all_or_nothing() {
        let (ratelimit, now) =
            in_memory(&[Quota::fixed_window(3, second()).unwrap(), Quota::gcra(4, 2, second()).unwrap()]);
        let granted = ratelimit.limit("ip", 3).await.unwrap();
        assert_eq!((granted.decision.success, granted.reason, granted.limits.len()), (true, Reason::Decided, 2));
        let denied = ratelimit.limit("ip", 1).await.unwrap();
        // The window denies, GCRA would allow: nothing taken from either.
        assert_eq!(denied.limits.iter().map(|d| d.success).collect::<Vec<_>>(), [false, true]);
        assert_eq!((denied.decision.retry_after, denied.limits[1].remaining), (1000, 1));
        now.fetch_add(1000, Ordering::Relaxed);
        let next = ratelimit.limit("ip", 1).await.unwrap();
        assert_eq!((next.decision.success, next.limits[0].remaining), (true, 2));
        assert_eq!(ratelimit.remaining("ip").await.unwrap().remaining, 2);
    }

    #[tokio::test]
    async fn refunds_releases_and_resets_by_receipt() {
        let (ratelimit, _) = in_memory(&[Quota::concurrency(2, second()).unwrap()]);
        let lease = ratelimit.limit("job", 2).await.unwrap().decision.receipt.unwrap();
        assert!(!ratelimit.limit("job", 1).await.unwrap().decision.success);
        let released = ratelimit.release("job", &[lease]).await.unwrap();
        assert_eq!((released[0].success, released[0].remaining), (true, 2));
        assert!(!ratelimit.release("job", &[lease]).await.unwrap()[0].success, "given back once");
        let forged = "1:12345".parse().unwrap();
        assert_eq!(ratelimit.refund("job", &[forged]).await.unwrap_err().code(), "EDGELIMIT_INVALID_ARGUMENT");
        ratelimit.limit("job", 1).await.unwrap();
        assert!(ratelimit.reset("job").await.unwrap());
        assert!(!ratelimit.reset("job").await.unwrap(), "nothing held any more");
        assert_eq!(ratelimit.state("job").await.unwrap_err().code(), "EDGELIMIT_INVALID_ARGUMENT");
        assert!(ratelimit.client().is_none());
    }

    #[tokio::test]
    async fn a_clock_error_or_a_mistake_is_an_error_never_an_admission() {
        let memory = Memory::with_clock(Box::new(|| Err(Error::InvalidConfig("the clock broke".into()))));
        let limits = [Limit::new(Quota::sliding_log(1, second()).unwrap())];
        let broken = Ratelimit::in_memory(&limits, memory, "edgelimit").unwrap();
        assert_eq!(broken.limit("ip", 1).await.unwrap_err().code(), "EDGELIMIT_INVALID_CONFIG");
        let (ratelimit, _) = in_memory(&[Quota::sliding_log(1, second()).unwrap()]);
        assert_eq!(ratelimit.limit("ip", 2).await.unwrap_err().code(), "EDGELIMIT_PERMITS_EXCEED_RATE");
        assert_eq!(ratelimit.limit("ip", 0).await.unwrap_err().code(), "EDGELIMIT_INVALID_ARGUMENT");
    }

    #[test]
    fn whole_states_are_swept_so_memory_follows_the_identifiers_limited() {
        let now = Arc::new(AtomicU64::new(T0));
        let clock = now.clone();
        let memory = Memory::with_clock(Box::new(move || Ok(clock.load(Ordering::Relaxed))));
        let client = crate::RestClient::new("http://memory.invalid", "t").unwrap();
        let limiter = Limiter::new(client, "w", Quota::fixed_window(1, second()).unwrap()).unwrap();
        for id in 0..3000 {
            memory.limit_all(&[limiter.request(&*id.to_string(), 1)]).unwrap();
        }
        now.fetch_add(1000, Ordering::Relaxed);
        // The 3000 states of the window before are whole now: the sweep at 4096 states forgets them.
        for id in 0..1100 {
            memory.limit_all(&[limiter.request(&*format!("next {id}"), 1)]).unwrap();
        }
        let held = memory.states.lock().unwrap().by_key.len();
        assert!(held <= 1100, "{held} states kept");
    }
}
