//! Limits spread over Redis Cluster slots, decided in one pipeline, and the give-back of the grants of a request
//! that is not admitted.

use std::collections::BTreeMap;

use super::batch::{Batch, Operation};
use super::{hash_slot, limit_all, refund_all, LimitRequest, Receipt};
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::rest::Script;

/// [`limit_all`] for limits whose keys live in different Redis Cluster slots, in one round trip when admitted.
///
/// Each slot's group is decided by its own script, all in one pipeline, each all-or-nothing. If one group denies or
/// fails while others grant, those grants are given back by their receipts in a second round trip; in between,
/// another request may be denied: under-admission, never over-admission.
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
        groups.entry(hash_slot(request.limiter.state_key(&request.id))).or_default().push(i);
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
    // If the round trip fails as a whole, nothing is known of what ran: nothing is sent again, and any grants keep
    // their permits until they free (under-admission).
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
                decided.failed.push(FailedGroup { requests: members, error });
            }
        }
    }
    if !decided.success {
        decided.give_back = give_back(requests, &mut decided.decisions).await;
    }
    Ok(decided)
}

/// What [`limit_all_across_slots`] decided. The request is admitted only when `success` is true, whatever `failed`
/// and `give_back` say.
#[derive(Debug)]
pub struct AcrossSlots {
    /// True when every group granted (nothing was given back).
    pub success: bool,
    /// One per request, in order; `None` for a group whose reply was an error. After a give-back a grant shows the
    /// standing after its refund, and keeps its receipt only if the refund found nothing to give back.
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
        self.decisions.iter().flatten().map(|d| d.retry_after).max().unwrap_or(0)
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
    /// Some grants may not have been given back (the first failure is here). Never retried, since a refund that timed
    /// out may have run: those permits stay taken until they free (under-admission).
    Failed(Error),
}

/// Gives back every grant among `decisions` by its receipt, in one pipeline; a decision shows the standing after,
/// and loses its receipt if given back. Sent once: a refund run twice would give back twice.
async fn give_back(requests: &[LimitRequest<'_>], decisions: &mut [Option<Decision>]) -> GiveBack {
    let granted: Vec<(usize, Receipt)> =
        (decisions.iter().enumerate()).filter_map(|(i, decision)| Some((i, (*decision)?.receipt?))).collect();
    if granted.is_empty() {
        return GiveBack::NotNeeded;
    }
    let refunds: Vec<(LimitRequest, Receipt)> =
        granted.iter().map(|&(i, receipt)| (requests[i].clone(), receipt)).collect();
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
                    // Given back: nothing left to hold. A grant that gave nothing back keeps its receipt: it was spent.
                    decision.receipt = decision.receipt.filter(|_| !after.success);
                }
            }
            Err(error) if matches!(outcome, GiveBack::Done) => outcome = GiveBack::Failed(error),
            Err(_) => {}
        }
    }
    outcome
}
