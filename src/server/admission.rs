//! Fair shares of a server-wide resource (connections, calls, request bytes) among peers.
//!
//! One policy, used for all three:
//! - a peer (a remote IP address) holds at most `per_peer`;
//! - below the server-wide `limit`, anyone within their per-peer cap is admitted;
//! - at the limit, a peer holding less than its fair share (`limit` / peers holding any)
//!   is still admitted, from a `reserve` above the limit, so that a newcomer or a light
//!   user is served however much the heavy ones hold; everyone else is refused (calls,
//!   connections) or waits (request bytes) until some of the resource is given back.
//!
//! Nothing here queues: a refusal is immediate, and a waiter is woken whenever anything
//! is given back and tries again, so a small request never waits behind a large one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

/// How a [`FairShare`] divides its resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SharePolicy {
    /// Held by all peers together before only those under their fair share get more.
    pub(crate) limit: usize,
    /// Above `limit`, for peers under their fair share.
    pub(crate) reserve: usize,
    /// Held by one peer at most.
    pub(crate) per_peer: usize,
}

impl SharePolicy {
    /// `limit` with the default reserve (an eighth of it, at least one), and a per-peer
    /// cap of at most `limit`.
    pub(crate) fn new(limit: usize, per_peer: usize) -> Self {
        SharePolicy { limit, reserve: (limit / 8).max(1), per_peer: per_peer.clamp(1, limit.max(1)) }
    }
}

/// Why a take was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The peer holds its per-peer cap.
    PeerCap,
    /// The server is at its limit and the peer holds at least its fair share.
    Full,
}

#[derive(Debug, Default)]
struct Holdings {
    total: usize,
    peers: HashMap<IpAddr, usize>,
    waiters: Vec<Waker>,
}

/// A resource shared fairly among peers; see the module docs.
#[derive(Debug)]
pub(crate) struct FairShare {
    policy: SharePolicy,
    holdings: Mutex<Holdings>,
}

impl FairShare {
    /// A resource divided by `policy`.
    pub(crate) fn new(policy: SharePolicy) -> Arc<Self> {
        Arc::new(FairShare { policy, holdings: Mutex::default() })
    }

    /// The policy in force.
    pub(crate) fn policy(&self) -> SharePolicy {
        self.policy
    }

    /// Held by all peers now.
    pub(crate) fn total(&self) -> usize {
        self.holdings.lock().total
    }

    /// Peers holding any now.
    #[cfg(test)]
    pub(crate) fn peers(&self) -> usize {
        self.holdings.lock().peers.len()
    }

    /// Takes `amount` for `peer`, or says why not.
    pub(crate) fn try_take(self: &Arc<Self>, peer: IpAddr, amount: usize) -> Result<Share, Refusal> {
        let mut holdings = self.holdings.lock();
        self.admit(&mut holdings, peer, amount)?;
        Ok(Share { pool: Arc::clone(self), peer, amount })
    }

    /// As [`FairShare::try_take`], but a refusal waits: the task is woken when anything
    /// is given back. `amount` must be at most the per-peer cap, or it waits forever.
    pub(crate) fn poll_take(
        self: &Arc<Self>,
        peer: IpAddr,
        amount: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Share> {
        let mut holdings = self.holdings.lock();
        match self.admit(&mut holdings, peer, amount) {
            Ok(()) => Poll::Ready(Share { pool: Arc::clone(self), peer, amount }),
            Err(_) => {
                holdings.waiters.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    fn admit(&self, holdings: &mut Holdings, peer: IpAddr, amount: usize) -> Result<(), Refusal> {
        let held = holdings.peers.get(&peer).copied().unwrap_or(0);
        if held + amount > self.policy.per_peer {
            return Err(Refusal::PeerCap);
        }
        let total = holdings.total + amount;
        if total > self.policy.limit {
            let peers = holdings.peers.len() + usize::from(held == 0);
            let fair = self.policy.limit / peers.max(1);
            if held + amount > fair || total > self.policy.limit + self.policy.reserve {
                return Err(Refusal::Full);
            }
        }
        holdings.total = total;
        *holdings.peers.entry(peer).or_default() += amount;
        Ok(())
    }

    fn give_back(&self, peer: IpAddr, amount: usize) {
        if amount == 0 {
            return;
        }
        let waiters = {
            let mut holdings = self.holdings.lock();
            holdings.total -= amount;
            if let Some(held) = holdings.peers.get_mut(&peer) {
                *held -= amount;
                if *held == 0 {
                    holdings.peers.remove(&peer);
                }
            }
            std::mem::take(&mut holdings.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }
}

/// A peer's holding of a [`FairShare`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Share {
    pool: Arc<FairShare>,
    peer: IpAddr,
    amount: usize,
}

impl Share {
    /// How much this holds.
    pub(crate) fn amount(&self) -> usize {
        self.amount
    }

    /// The most one peer may hold of this resource.
    pub(crate) fn cap(&self) -> usize {
        self.pool.policy.per_peer
    }

    /// Takes `more` for the same peer into this holding, or says why not.
    pub(crate) fn try_grow(&mut self, more: usize) -> Result<(), Refusal> {
        let mut holdings = self.pool.holdings.lock();
        self.pool.admit(&mut holdings, self.peer, more)?;
        self.amount += more;
        Ok(())
    }

    /// Takes `more` into this holding past the per-peer cap, when it is all its peer
    /// holds and the server-wide limit has room: what runs alone may take the server's
    /// room, never its reserve.
    pub(crate) fn try_grow_alone(&mut self, more: usize) -> Result<(), Refusal> {
        let mut holdings = self.pool.holdings.lock();
        if holdings.peers.get(&self.peer).copied().unwrap_or(0) != self.amount {
            return Err(Refusal::PeerCap);
        }
        if holdings.total + more > self.pool.policy.limit {
            return Err(Refusal::Full);
        }
        holdings.total += more;
        *holdings.peers.entry(self.peer).or_default() += more;
        self.amount += more;
        Ok(())
    }

    /// The most all peers together hold before only those under their fair share get more.
    pub(crate) fn limit(&self) -> usize {
        self.pool.policy.limit
    }

    /// Gives back what this holds beyond `amount`.
    pub(crate) fn shrink_to(&mut self, amount: usize) {
        if amount < self.amount {
            self.pool.give_back(self.peer, self.amount - amount);
            self.amount = amount;
        }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.pool.give_back(self.peer, self.amount);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    #[test]
    fn a_peer_is_held_to_its_cap() {
        let pool = FairShare::new(SharePolicy { limit: 100, reserve: 10, per_peer: 30 });
        let _a = pool.try_take(peer(1), 30).unwrap();
        assert_eq!(pool.try_take(peer(1), 1).unwrap_err(), Refusal::PeerCap);
        assert!(pool.try_take(peer(2), 30).is_ok());
    }

    #[test]
    fn at_the_limit_only_a_peer_under_its_fair_share_gets_in_from_the_reserve() {
        let pool = FairShare::new(SharePolicy { limit: 100, reserve: 10, per_peer: 80 });
        let heavy = [pool.try_take(peer(1), 70).unwrap(), pool.try_take(peer(2), 30).unwrap()];
        // Full: the peer over its fair share (100 / 2) is refused; the one under it, and
        // a newcomer, are admitted from the reserve.
        assert_eq!(pool.try_take(peer(1), 1).unwrap_err(), Refusal::Full);
        let under = pool.try_take(peer(2), 1).unwrap();
        let light = pool.try_take(peer(3), 5).unwrap();
        assert_eq!(pool.total(), 106);
        // The reserve is bounded too.
        assert_eq!(pool.try_take(peer(4), 5).unwrap_err(), Refusal::Full);
        drop((under, light, heavy));
        assert_eq!((pool.total(), pool.peers()), (0, 0));
    }

    #[test]
    fn a_waiter_is_woken_when_anything_is_given_back() {
        let pool = FairShare::new(SharePolicy { limit: 10, reserve: 0, per_peer: 10 });
        let held = pool.try_take(peer(1), 10).unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(pool.poll_take(peer(2), 5, &mut cx).is_pending());
        assert_eq!(pool.holdings.lock().waiters.len(), 1);
        drop(held);
        assert!(pool.holdings.lock().waiters.is_empty());
        assert!(pool.poll_take(peer(2), 5, &mut cx).is_ready());
    }

    #[test]
    fn a_share_grows_within_the_same_rules() {
        let pool = FairShare::new(SharePolicy { limit: 10, reserve: 0, per_peer: 8 });
        let mut share = pool.try_take(peer(1), 4).unwrap();
        share.try_grow(4).unwrap();
        assert_eq!(share.amount(), 8);
        assert_eq!(share.try_grow(1).unwrap_err(), Refusal::PeerCap);
        drop(share);
        assert_eq!(pool.total(), 0);
    }
}
