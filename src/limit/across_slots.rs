//! Limits spread over Redis Cluster slots, decided in one pipeline: [`limit_all_across_slots`], and the give-back of
//! the grants of a request that is not admitted.

use std::collections::BTreeMap;

use super::batch::{Batch, Operation};
use super::{hash_slot, limit_all, refund_all, LimitRequest, Receipt};
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::script::Script;

/// [`limit_all`] for limits whose keys live in different Redis Cluster slots, still in one round trip when the
/// request is admitted.
///
/// The requests are grouped by hash slot and each group is decided by its own script, all in one pipeline. Each
/// group is all-or-nothing; across groups, if one denies (or its reply is an error) while others grant, those grants
/// are given back exactly, each by its receipt, in a second round trip (none when nothing was granted). Between the
/// two round trips another request may see those permits as taken and be denied: this errs toward under-admission,
/// never over-admission. A denial stays a denial whatever becomes of the give-back (see [`AcrossSlots`]).
pub async fn limit_all_across_slots(requests: &[LimitRequest<'_>]) -> Result<AcrossSlots> {
    let first = requests
        .first()
        .ok_or_else(|| Error::InvalidArgument("no limits to decide: pass at least one request".into()))?;
    super::stored_copy::refresh(requests.iter().map(|request| request.limiter)).await?;
    let mut groups: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, request) in requests.iter().enumerate() {
        if request.limiter.now_ms != first.limiter.now_ms {
            return Err(Error::InvalidArgument(
                "limits decided together must all use the server's clock or the same explicit time".into(),
            ));
        }
        groups
            .entry(hash_slot(request.limiter.state_key(&request.id)))
            .or_default()
            .push(i);
    }
    if groups.len() <= 1 {
        let decided = limit_all(requests).await?;
        return Ok(AcrossSlots {
            success: decided.success,
            decisions: decided.decisions.into_iter().map(Some).collect(),
            failed: Vec::new(),
            give_back: GiveBack::NotNeeded,
        });
    }
    let batches = groups
        .values()
        .map(|members| {
            let group: Vec<LimitRequest> = members.iter().map(|&i| requests[i].clone()).collect();
            Batch::new(Operation::Limit, &group)
        })
        .collect::<Result<Vec<_>>>()?;
    let client = &first.limiter.client;
    // If this round trip fails as a whole (a timeout, the store down), nothing is known of what ran: groups that
    // granted keep their permits until they free (under-admission), and nothing is sent again.
    let replies = Script::run_many(client, &batches.iter().map(Batch::call).collect::<Vec<_>>()).await?;
    let mut decided = AcrossSlots {
        success: true,
        decisions: vec![None; requests.len()],
        failed: Vec::new(),
        give_back: GiveBack::NotNeeded,
    };
    for ((members, batch), reply) in groups.into_values().zip(&batches).zip(replies) {
        match reply.and_then(|value| batch.decode(value)) {
            Ok(group) => {
                decided.success &= group.success;
                for (&i, decision) in members.iter().zip(group.decisions) {
                    decided.decisions[i] = Some(decision);
                }
            }
            Err(error) => {
                decided.success = false;
                decided.failed.push(FailedGroup {
                    requests: members,
                    error,
                });
            }
        }
    }
    if !decided.success {
        decided.give_back = give_back(requests, &mut decided.decisions).await;
    }
    Ok(decided)
}

/// What [`limit_all_across_slots`] decided. The request is admitted only when `success` is true; otherwise it is not,
/// whatever `failed` and `give_back` say: a group's denial is a denial even if the give-back failed, and a group
/// whose reply was an error admitted nothing the caller may use (its grants, if any, were given back).
#[derive(Debug)]
pub struct AcrossSlots {
    /// True when every group granted (nothing was given back).
    pub success: bool,
    /// One per request, in order; `None` for the requests of a group whose reply was an error. Each one's `success`
    /// says whether *that* limit allowed the request. After a give-back, a grant shows the standing after its refund
    /// and has no receipt if the refund gave it back; it keeps its receipt if its refund found nothing to give back
    /// (its window had passed, its tokens refilled, its lease expired: spent where the receipt says).
    pub decisions: Vec<Option<Decision>>,
    /// The groups whose reply was an error (a partial failure when other groups decided).
    pub failed: Vec<FailedGroup>,
    /// What became of the grants of the groups that granted, when the request was not admitted.
    pub give_back: GiveBack,
}

impl AcrossSlots {
    /// True when a limit that decided denied the request: a known denial, to answer as one (with
    /// [`retry_after`](AcrossSlots::retry_after)) even when another group failed.
    pub fn denied(&self) -> bool {
        self.decisions.iter().flatten().any(|decision| !decision.success)
    }

    /// Milliseconds until every denying limit that decided would allow the request (0 when none denies).
    pub fn retry_after(&self) -> u64 {
        self.decisions
            .iter()
            .flatten()
            .map(|d| d.retry_after)
            .max()
            .unwrap_or(0)
    }
}

/// A group of [`limit_all_across_slots`] whose reply was an error.
#[derive(Debug)]
pub struct FailedGroup {
    /// The indexes of its requests, in the order they were given.
    pub requests: Vec<usize>,
    /// What its reply was.
    pub error: Error,
}

/// What became of the grants [`limit_all_across_slots`] had to give back.
#[derive(Debug)]
#[non_exhaustive]
pub enum GiveBack {
    /// Nothing to give back: the request was admitted, or no group granted.
    NotNeeded,
    /// Every grant was given back by its receipt.
    Done,
    /// Some grants may not have been given back (the first failure is here). Never retried, since a refund that
    /// timed out may have run: those grants keep their permits until they free (a window ends, the bucket refills,
    /// a lease expires). Under-admission, never over-admission.
    Failed(Error),
}

/// Gives back every grant among `decisions` by its receipt, in one pipeline (none when there is no grant); a decision
/// shows the standing after its refund, and loses its receipt if the refund gave it back. Sent once: after an I/O
/// error or a timeout the refunds may have run, and a refund run twice would give back twice. If it never runs, the
/// grants keep their permits until they free: under-admission until then.
async fn give_back(requests: &[LimitRequest<'_>], decisions: &mut [Option<Decision>]) -> GiveBack {
    let granted: Vec<(usize, Receipt)> = (decisions.iter().enumerate())
        .filter_map(|(i, decision)| Some((i, (*decision)?.receipt?)))
        .collect();
    if granted.is_empty() {
        return GiveBack::NotNeeded;
    }
    let refunds: Vec<(LimitRequest, Receipt)> = granted
        .iter()
        .map(|&(i, receipt)| (requests[i].clone(), receipt))
        .collect();
    let afters = match refund_all(&refunds).await {
        Ok(afters) => afters,
        Err(error) => return GiveBack::Failed(error),
    };
    let mut outcome = GiveBack::Done;
    for ((i, _), after) in granted.into_iter().zip(afters) {
        match after {
            Ok(after) => {
                if let Some(decision) = &mut decisions[i] {
                    decision.remaining = after.remaining;
                    decision.reset = after.reset;
                    // Given back: nothing left to hold. A grant that gave nothing back (its window passed, its
                    // tokens refilled, its lease expired) keeps its receipt: it was spent where it says.
                    decision.receipt = decision.receipt.filter(|_| !after.success);
                }
            }
            Err(error) if matches!(outcome, GiveBack::Done) => outcome = GiveBack::Failed(error),
            Err(_) => {}
        }
    }
    outcome
}
