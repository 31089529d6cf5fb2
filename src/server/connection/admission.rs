//! Fair shares of a server-wide resource (connections, calls, request bytes) among clients.
//!
//! # The rule
//!
//! A client is an IPv4 address, or the first bits of an IPv6 address (a /64 by default:
//! a host is handed a whole /64, so counting its addresses apart would make one host many
//! clients). For each resource, `limit` is the server-wide bound and `n` the number of
//! clients holding any of it, a client that holds none counting itself; a client's fair
//! share is `limit / n`. A client asking for some of the resource:
//! 1. gets it if it fits under the limit: with capacity to spare, a lone client may use
//!    all of it (a per-client cap, off by default, bounds it further);
//! 2. else gets it if it then holds no more than its fair share: the room is taken back
//!    from the client holding the most, in the order its holders set ([`Holder`]: an idle
//!    connection before a busy one, the longest idle first; the longest-running call
//!    first), and that holding ends: the connection closes, the call ends with
//!    `RESOURCE_EXHAUSTED`;
//! 3. else is refused (a connection, a call) or waits until something is given back
//!    (request bytes).
//!
//! # The invariant
//!
//! The total held never exceeds the limit, and a client asking for no more than its fair
//! share (and within any per-client cap) is never refused, whatever the others hold.
//! Rule 2 always finds the room: when the total is at the limit and the taker will hold
//! at most `limit / n`, the others hold more than `(n - 1) * limit / n` between them, so
//! the heaviest of them holds more than `limit / n`, its own share and more than the
//! taker will hold. So a holding is only ever taken from a client above its share, and
//! a client at or below its share keeps what it holds. The unit tests check this with
//! attackers of every kind (many calls, many connections, large byte holdings) against
//! one newcomer.
//!
//! Nothing here queues: a refusal is immediate, and a waiter is woken whenever anything
//! is given back and tries again, so a small request never waits behind a large one.

use std::collections::hash_map::Entry as Slot;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

/// A client as the shares count it: an IPv4 address, or an IPv6 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Client(IpAddr);

/// How remote addresses are grouped into clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grouping {
    /// Leading bits of an IPv6 address that name its client (128: each address apart).
    pub(crate) ipv6_prefix: u8,
}

impl Default for Grouping {
    /// An IPv6 /64, what one host is usually given.
    fn default() -> Self {
        Grouping { ipv6_prefix: 64 }
    }
}

impl Grouping {
    /// The client `ip` belongs to; an IPv4-mapped IPv6 address (a dual-stack listener's
    /// IPv4 peer) is that IPv4 address.
    pub(crate) fn client(self, ip: IpAddr) -> Client {
        let v6 = match ip {
            IpAddr::V4(v4) => return Client(IpAddr::V4(v4)),
            IpAddr::V6(v6) => v6,
        };
        if let Some(v4) = v6.to_ipv4_mapped() {
            return Client(IpAddr::V4(v4));
        }
        let kept = u32::from(self.ipv6_prefix.min(128));
        let mask = u128::MAX.checked_shl(128 - kept).unwrap_or(0);
        Client(IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask)))
    }
}

/// What holds a share, so that the share can be taken back from it: a connection, a call.
pub(crate) trait Holder: Send + Sync + Debug {
    /// Order among one client's holdings: the least is taken back first.
    fn precedence(&self) -> (usize, Instant);
    /// Ends the holding (closes the connection, ends the call): its share no longer counts.
    fn revoke(&self);
}

/// How a [`FairShare`] divides its resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SharePolicy {
    /// Held by all clients together, at most.
    pub(crate) limit: usize,
    /// Held by one client at most (the limit unless a cap is set).
    pub(crate) per_client: usize,
    /// Which addresses are one client.
    pub(crate) grouping: Grouping,
}

impl SharePolicy {
    /// `limit` (at least one) shared among clients of `grouping`, each capped at
    /// `per_client` if set.
    pub(crate) fn new(limit: usize, per_client: Option<usize>, grouping: Grouping) -> Self {
        let limit = limit.max(1);
        SharePolicy { limit, per_client: per_client.unwrap_or(limit).clamp(1, limit), grouping }
    }
}

/// Why a take was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The client would hold more than one client may: the per-client cap, or the limit
    /// itself.
    PeerCap,
    /// The resource is at its limit (`total` held) and the client would hold more than
    /// its fair share.
    Full {
        /// Held by all clients when the take was refused.
        total: usize,
    },
}

/// One holding in the books.
#[derive(Debug)]
struct Entry {
    amount: usize,
    holder: Arc<dyn Holder>,
}

/// One client's holdings, by their ids (given in order, so a B-tree appends them; no
/// hashing on every call's take and give-back).
#[derive(Debug, Default)]
struct ClientHoldings {
    held: usize,
    entries: BTreeMap<u64, Entry>,
}

/// The books' hasher: a client is looked up on every take and give-back, where SipHash
/// cost a call about 300 instructions a lookup (docs/performance.md,
/// "The unary guard, counted"). foldhash's quality variant is seeded at random per process, so a
/// client cannot aim addresses at one bucket; the books hold at most one entry a client
/// with something held.
type ClientMap = HashMap<Client, ClientHoldings, foldhash::quality::RandomState>;

#[derive(Debug, Default)]
struct Holdings {
    total: usize,
    clients: ClientMap,
    next_entry: u64,
    waiters: Vec<Waker>,
    /// Whether the total was last found above the high [`PressureMarks`].
    pressed: bool,
}

impl Holdings {
    /// Books a new holding of `amount` for `client`.
    fn insert(&mut self, client: Client, amount: usize, holder: Arc<dyn Holder>) -> u64 {
        let id = self.next_entry;
        self.next_entry += 1;
        self.total += amount;
        let holdings = self.clients.entry(client).or_default();
        holdings.held += amount;
        holdings.entries.insert(id, Entry { amount, holder });
        id
    }

    /// Takes one holding back from the client holding the most other than `taker`, and
    /// returns its holder to revoke.
    fn take_back_one(&mut self, taker: Client) -> Option<Arc<dyn Holder>> {
        let (&victim, _) = self.clients.iter().filter(|(c, _)| **c != taker).max_by_key(|(_, h)| h.held)?;
        let holdings = self.clients.get_mut(&victim)?;
        let (&id, _) = holdings.entries.iter().min_by_key(|(id, entry)| (entry.holder.precedence(), **id))?;
        let entry = holdings.entries.remove(&id)?;
        holdings.held -= entry.amount;
        self.total -= entry.amount;
        if holdings.held == 0 {
            self.clients.remove(&victim);
        }
        Some(entry.holder)
    }

    /// Removes a holding from the books; false if it was taken back already.
    fn remove(&mut self, client: Client, id: u64) -> bool {
        let Slot::Occupied(mut holdings) = self.clients.entry(client) else { return false };
        let Some(entry) = holdings.get_mut().entries.remove(&id) else { return false };
        holdings.get_mut().held -= entry.amount;
        self.total -= entry.amount;
        if holdings.get().held == 0 {
            holdings.remove();
        }
        true
    }
}

/// Marks on a resource's total that tell `on_change` when it is held heavily: `true`
/// once the total rises above `high`, `false` once it falls back to `low` or below (two
/// marks, so that a total hovering near one does not flip it back and forth).
#[derive(Clone)]
pub(crate) struct PressureMarks {
    pub(crate) high: usize,
    pub(crate) low: usize,
    /// Called under the books' lock, in the order of the changes: keep it cheap.
    pub(crate) on_change: Arc<dyn Fn(bool) + Send + Sync>,
}

impl Debug for PressureMarks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PressureMarks")
            .field("high", &self.high)
            .field("low", &self.low)
            .finish_non_exhaustive()
    }
}

/// The books, locked; on unlocking, tells the [`PressureMarks`] of a change in pressure.
struct Books<'a> {
    holdings: MutexGuard<'a, Holdings>,
    marks: Option<&'a PressureMarks>,
}

impl std::ops::Deref for Books<'_> {
    type Target = Holdings;

    fn deref(&self) -> &Holdings {
        &self.holdings
    }
}

impl std::ops::DerefMut for Books<'_> {
    fn deref_mut(&mut self) -> &mut Holdings {
        &mut self.holdings
    }
}

impl Drop for Books<'_> {
    fn drop(&mut self) {
        let Some(marks) = self.marks else { return };
        let holdings = &mut *self.holdings;
        let pressed = holdings.total > if holdings.pressed { marks.low } else { marks.high };
        if pressed != holdings.pressed {
            holdings.pressed = pressed;
            (marks.on_change)(pressed);
        }
    }
}

/// A resource shared fairly among clients; see the module docs.
#[derive(Debug)]
pub(crate) struct FairShare {
    policy: SharePolicy,
    holdings: Mutex<Holdings>,
    marks: Option<PressureMarks>,
}

impl FairShare {
    /// A resource divided by `policy`.
    pub(crate) fn new(policy: SharePolicy) -> Arc<Self> {
        Arc::new(FairShare { policy, holdings: Mutex::default(), marks: None })
    }

    /// A resource divided by `policy`, whose total is watched by `marks`.
    pub(crate) fn with_pressure_marks(policy: SharePolicy, marks: PressureMarks) -> Arc<Self> {
        Arc::new(FairShare { policy, holdings: Mutex::default(), marks: Some(marks) })
    }

    /// The books, locked for a change: every change goes through here, so that the
    /// pressure marks see it (a read alone locks `holdings` itself).
    fn books(&self) -> Books<'_> {
        Books { holdings: self.holdings.lock(), marks: self.marks.as_ref() }
    }

    /// The policy in force.
    pub(crate) fn policy(&self) -> SharePolicy {
        self.policy
    }

    /// Held by all clients now.
    pub(crate) fn total(&self) -> usize {
        self.holdings.lock().total
    }

    /// Clients holding any now.
    #[cfg(test)]
    pub(crate) fn clients(&self) -> usize {
        self.holdings.lock().clients.len()
    }

    /// Takes `amount` for the client of `ip`, held by `holder`, or says why not.
    pub(crate) fn try_take(
        self: &Arc<Self>,
        ip: IpAddr,
        amount: usize,
        holder: Arc<dyn Holder>,
    ) -> Result<Share, Refusal> {
        let client = self.policy.grouping.client(ip);
        let (share, taken_back) = {
            let mut holdings = self.books();
            let taken_back = self.admit(&mut holdings, client, amount)?;
            let id = holdings.insert(client, amount, holder);
            (Share { pool: Arc::clone(self), client, id, amount, took_back: taken_back.len() }, taken_back)
        };
        self.revoke(taken_back);
        Ok(share)
    }

    /// As [`FairShare::try_take`], but a refusal waits: the task is woken when anything
    /// is given back. `amount` must be at most the per-client cap, or it waits forever.
    pub(crate) fn poll_take(
        self: &Arc<Self>,
        ip: IpAddr,
        amount: usize,
        holder: &Arc<dyn Holder>,
        cx: &mut Context<'_>,
    ) -> Poll<Share> {
        let client = self.policy.grouping.client(ip);
        let (share, taken_back) = {
            let mut holdings = self.books();
            match self.admit(&mut holdings, client, amount) {
                Ok(taken_back) => {
                    let id = holdings.insert(client, amount, Arc::clone(holder));
                    let took_back = taken_back.len();
                    (Share { pool: Arc::clone(self), client, id, amount, took_back }, taken_back)
                }
                Err(_) => {
                    holdings.waiters.push(cx.waker().clone());
                    return Poll::Pending;
                }
            }
        };
        self.revoke(taken_back);
        Poll::Ready(share)
    }

    /// Rules 1 to 3 of the module docs: what must be taken back for `client` to take
    /// `amount` more, already out of the books, or why it may not.
    fn admit(
        &self,
        holdings: &mut Holdings,
        client: Client,
        amount: usize,
    ) -> Result<Vec<Arc<dyn Holder>>, Refusal> {
        let held = holdings.clients.get(&client).map_or(0, |c| c.held);
        let after = held + amount;
        if after > self.policy.per_client {
            return Err(Refusal::PeerCap);
        }
        if holdings.total + amount <= self.policy.limit {
            return Ok(Vec::new());
        }
        let clients = holdings.clients.len() + usize::from(held == 0);
        if after.saturating_mul(clients) > self.policy.limit {
            return Err(Refusal::Full { total: holdings.total });
        }
        let mut taken_back = Vec::new();
        while holdings.total + amount > self.policy.limit {
            // Always found (the invariant in the module docs); without one the take
            // would only pass the limit, never refuse a client within its share.
            let Some(holder) = holdings.take_back_one(client) else { break };
            taken_back.push(holder);
        }
        Ok(taken_back)
    }

    /// Ends what was taken back, outside the lock, and wakes the waiters: taking back a
    /// large holding may have freed more than was needed.
    fn revoke(&self, taken_back: Vec<Arc<dyn Holder>>) {
        if taken_back.is_empty() {
            return;
        }
        taken_back.iter().for_each(|holder| holder.revoke());
        let waiters = std::mem::take(&mut self.books().waiters);
        waiters.into_iter().for_each(Waker::wake);
    }

    fn give_back(&self, client: Client, id: u64) {
        let waiters = {
            let mut holdings = self.books();
            if !holdings.remove(client, id) {
                return;
            }
            std::mem::take(&mut holdings.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }
}

/// A client's holding of a [`FairShare`], given back when dropped (unless it was taken
/// back first).
#[derive(Debug)]
pub(crate) struct Share {
    pool: Arc<FairShare>,
    client: Client,
    id: u64,
    amount: usize,
    took_back: usize,
}

impl Share {
    /// How much this holds.
    pub(crate) fn amount(&self) -> usize {
        self.amount
    }

    /// The most one client may hold of this resource.
    pub(crate) fn cap(&self) -> usize {
        self.pool.policy.per_client
    }

    /// How many holdings of heavier clients were taken back to make room for this one.
    pub(crate) fn took_back(&self) -> usize {
        self.took_back
    }

    /// Takes `more` for the same client into this holding, or says why not (a holding
    /// taken back cannot grow).
    pub(crate) fn try_grow(&mut self, more: usize) -> Result<(), Refusal> {
        let taken_back = {
            let mut holdings = self.pool.books();
            let total = holdings.total;
            let booked = holdings.clients.get(&self.client).is_some_and(|c| c.entries.contains_key(&self.id));
            if !booked {
                return Err(Refusal::Full { total });
            }
            let taken_back = self.pool.admit(&mut holdings, self.client, more)?;
            holdings.total += more;
            if let Some(client) = holdings.clients.get_mut(&self.client) {
                client.held += more;
                if let Some(entry) = client.entries.get_mut(&self.id) {
                    entry.amount += more;
                }
            }
            taken_back
        };
        self.amount += more;
        self.pool.revoke(taken_back);
        Ok(())
    }

    /// Gives back what this holds beyond `amount` (nothing if it was taken back).
    pub(crate) fn shrink_to(&mut self, amount: usize) {
        if amount >= self.amount {
            return;
        }
        let less = self.amount - amount;
        let waiters = {
            let mut holdings = self.pool.books();
            let Some(client) = holdings.clients.get_mut(&self.client) else { return };
            let Some(entry) = client.entries.get_mut(&self.id) else { return };
            entry.amount -= less;
            client.held -= less;
            holdings.total -= less;
            std::mem::take(&mut holdings.waiters)
        };
        self.amount = amount;
        waiters.into_iter().for_each(Waker::wake);
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.pool.give_back(self.client, self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    fn peer(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    const BY_ADDRESS: Grouping = Grouping { ipv6_prefix: 64 };

    #[test]
    fn the_default_grouping_is_by_64() {
        assert_eq!(Grouping::default(), BY_ADDRESS);
    }

    /// A holding that records being taken back; the later `since`, the later it goes.
    #[derive(Debug)]
    struct Held {
        busy: usize,
        since: Instant,
        revoked: AtomicBool,
    }

    impl Held {
        fn new() -> Arc<Held> {
            Held::busy(0, Duration::ZERO)
        }

        fn busy(busy: usize, after: Duration) -> Arc<Held> {
            // A fixed origin, so that precedence does not depend on when each was made.
            static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            let since = *ORIGIN.get_or_init(Instant::now) + after;
            Arc::new(Held { busy, since, revoked: AtomicBool::new(false) })
        }

        fn revoked(&self) -> bool {
            self.revoked.load(Ordering::SeqCst)
        }
    }

    impl Holder for Held {
        fn precedence(&self) -> (usize, Instant) {
            (self.busy, self.since)
        }

        fn revoke(&self) {
            self.revoked.store(true, Ordering::SeqCst);
        }
    }

    fn take(pool: &Arc<FairShare>, n: u8, amount: usize) -> Result<(Share, Arc<Held>), Refusal> {
        let held = Held::new();
        pool.try_take(peer(n), amount, Arc::clone(&held) as Arc<dyn Holder>).map(|share| (share, held))
    }

    #[test]
    fn a_lone_client_may_use_everything_and_a_cap_bounds_it_when_set() {
        let pool = FairShare::new(SharePolicy::new(100, None, BY_ADDRESS));
        let all = take(&pool, 1, 100).unwrap();
        // More than the limit is more than any client may hold.
        assert_eq!(take(&pool, 1, 1).unwrap_err(), Refusal::PeerCap);
        drop(all);
        let capped = FairShare::new(SharePolicy::new(100, Some(30), BY_ADDRESS));
        let _a = take(&capped, 1, 30).unwrap();
        assert_eq!(take(&capped, 1, 1).unwrap_err(), Refusal::PeerCap);
        assert!(take(&capped, 2, 30).is_ok());
    }

    #[test]
    fn at_the_limit_a_client_within_its_share_takes_from_the_heaviest_idlest_first() {
        let pool = FairShare::new(SharePolicy::new(4, None, BY_ADDRESS));
        let (busy, idle, idle_longer) =
            (Held::busy(1, Duration::ZERO), Held::busy(0, Duration::from_secs(2)), Held::new());
        let heavy = [
            pool.try_take(peer(1), 1, Arc::clone(&busy) as Arc<dyn Holder>).unwrap(),
            pool.try_take(peer(1), 1, Arc::clone(&idle) as Arc<dyn Holder>).unwrap(),
            pool.try_take(peer(1), 1, Arc::clone(&idle_longer) as Arc<dyn Holder>).unwrap(),
        ];
        let (_light, light_held) = take(&pool, 2, 1).unwrap();
        // Full. The heavy client, over its share (4 / 2), is refused; a newcomer's share
        // is 4 / 3, so its one unit comes from the heavy client's idle holdings, the
        // longest idle first.
        assert_eq!(take(&pool, 1, 1).unwrap_err(), Refusal::Full { total: 4 });
        let (newcomer, _) = take(&pool, 3, 1).unwrap();
        assert_eq!(newcomer.took_back(), 1);
        assert!(idle_longer.revoked() && !idle.revoked() && !busy.revoked());
        assert_eq!(pool.total(), 4);
        // Two units would be more than its share: refused, and nothing is taken back.
        assert_eq!(take(&pool, 4, 2).unwrap_err(), Refusal::Full { total: 4 });
        let (_fourth, _) = take(&pool, 4, 1).unwrap();
        assert!(idle.revoked() && !busy.revoked() && !light_held.revoked());
        // What was taken back gives nothing back when it ends.
        drop(heavy);
        assert_eq!((pool.total(), pool.clients()), (3, 3));
    }

    #[test]
    fn a_waiter_is_woken_when_anything_is_given_back() {
        let pool = FairShare::new(SharePolicy::new(10, None, BY_ADDRESS));
        let held = take(&pool, 1, 10).unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let holder: Arc<dyn Holder> = Held::new();
        // Six units would be more than a newcomer's share (10 / 2): it waits.
        assert!(pool.poll_take(peer(2), 6, &holder, &mut cx).is_pending());
        assert_eq!(pool.holdings.lock().waiters.len(), 1);
        drop(held);
        assert!(pool.holdings.lock().waiters.is_empty());
        assert!(pool.poll_take(peer(2), 6, &holder, &mut cx).is_ready());
    }

    #[test]
    fn pressure_marks_hear_of_the_total_passing_the_high_mark_and_falling_to_the_low_one() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let hearing = Arc::clone(&heard);
        let on_change = Arc::new(move |pressed| hearing.lock().push(pressed));
        let marks = PressureMarks { high: 6, low: 3, on_change };
        let pool = FairShare::with_pressure_marks(SharePolicy::new(10, None, BY_ADDRESS), marks);
        let (first, _) = take(&pool, 1, 4).unwrap();
        assert!(heard.lock().is_empty(), "4 is below the high mark");
        let (mut second, _) = take(&pool, 2, 3).unwrap();
        assert_eq!(*heard.lock(), [true], "7 is above it");
        second.shrink_to(1);
        assert_eq!(*heard.lock(), [true], "5 is between the marks: still under pressure");
        drop(first);
        assert_eq!(*heard.lock(), [true, false], "1 is at most the low mark");
        second.try_grow(3).unwrap();
        assert_eq!(*heard.lock(), [true, false], "4 is between the marks: no pressure yet");
        second.try_grow(4).unwrap();
        assert_eq!(*heard.lock(), [true, false, true], "8 is above the high mark");
        // A third client's 5 would pass the limit of 10: the second client's holding (8,
        // more than a share of 10 / 2) is taken back in the same change, which leaves 5,
        // still above the low mark.
        let (third, _) = take(&pool, 3, 5).unwrap();
        assert_eq!(pool.total(), 5);
        assert_eq!(*heard.lock(), [true, false, true]);
        drop((third, second));
        assert_eq!(*heard.lock(), [true, false, true, false]);
    }

    #[test]
    fn a_share_grows_within_the_same_rules_unless_taken_back() {
        let pool = FairShare::new(SharePolicy::new(10, Some(8), BY_ADDRESS));
        let (mut share, _) = take(&pool, 1, 4).unwrap();
        share.try_grow(4).unwrap();
        assert_eq!(share.amount(), 8);
        assert_eq!(share.try_grow(1).unwrap_err(), Refusal::PeerCap);
        // Another client within its share (10 / 2) needs 3 of its 8: the whole holding is
        // taken back, the one it has.
        let (_other, _) = take(&pool, 2, 5).unwrap();
        assert_eq!(share.try_grow(1).unwrap_err(), Refusal::Full { total: 5 });
        drop(share);
        assert_eq!(pool.total(), 5);
    }

    #[test]
    fn ipv4_addresses_are_clients_and_ipv6_addresses_group_by_prefix() {
        let v6 = |s: &str| s.parse::<IpAddr>().unwrap();
        let by64 = BY_ADDRESS;
        assert_ne!(by64.client(peer(2)), by64.client(peer(3)));
        assert_eq!(by64.client(v6("2001:db8:1:2::5")), by64.client(v6("2001:db8:1:2:ffff::9")));
        assert_ne!(by64.client(v6("2001:db8:1:2::5")), by64.client(v6("2001:db8:1:3::5")));
        // A dual-stack listener's IPv4 peer is its IPv4 address.
        assert_eq!(by64.client(v6("::ffff:127.0.0.2")), by64.client(peer(2)));
        let each = Grouping { ipv6_prefix: 128 };
        assert_ne!(each.client(v6("2001:db8::5")), each.client(v6("2001:db8::6")));
        let by48 = Grouping { ipv6_prefix: 48 };
        assert_eq!(by48.client(v6("2001:db8:1:2::5")), by48.client(v6("2001:db8:1:3::5")));

        // Five addresses of one /64 are one client: the fifth is refused as the first
        // would be, and an address of another /64 is served from their holdings.
        let pool = FairShare::new(SharePolicy::new(4, None, by64));
        let holder = || Held::new() as Arc<dyn Holder>;
        let _held: Vec<_> =
            (1..=4).map(|i| pool.try_take(v6(&format!("2001:db8::{i}")), 1, holder()).unwrap()).collect();
        assert_eq!(pool.clients(), 1);
        assert!(pool.try_take(v6("2001:db8::5"), 1, holder()).is_err());
        assert!(pool.try_take(v6("2001:db8:0:1::1"), 1, holder()).is_ok());
    }

    /// What the simulation's attackers are.
    #[derive(Debug, Clone, Copy)]
    enum Attack {
        /// Calls: one unit at a time, each held.
        Calls,
        /// Connections: one unit at a time, some busy (taken back last).
        Connections,
        /// Request bytes: holdings of any size up to the whole limit.
        Bytes,
    }

    /// One attacker's holdings and their holders.
    type Holdings = Vec<(Share, Arc<Held>)>;

    /// Drops what was taken back, as the server does when the call or connection ends.
    fn end_taken_back(holdings: &mut Holdings) {
        holdings.retain(|(_, held)| !held.revoked());
    }

    proptest! {
        /// Attackers of one kind, as many as 12 clients, take and give back at random,
        /// then keep asking while one newcomer takes one unit at a time: the newcomer is
        /// admitted every time until it holds its fair share, nothing it holds is taken
        /// back, and the total never passes the limit.
        #[test]
        fn a_newcomer_gets_its_fair_share_whatever_the_attackers_hold(
            limit in 1usize..64,
            attackers in 1u8..12,
            kind in prop_oneof![Just(Attack::Calls), Just(Attack::Connections), Just(Attack::Bytes)],
            steps in proptest::collection::vec((0u8..12, 1usize..64, 0u8..4), 0..300),
        ) {
            let pool = FairShare::new(SharePolicy::new(limit, None, BY_ADDRESS));
            let mut held: Vec<Holdings> = (0..attackers).map(|_| Vec::new()).collect();
            let attack = |pool: &Arc<FairShare>, who: u8, size: usize, step: u8, held: &mut Vec<Holdings>| {
                let (amount, busy) = match kind {
                    Attack::Calls => (1, 0),
                    Attack::Connections => (1, usize::from(step % 2)),
                    Attack::Bytes => (1 + size % limit, 0),
                };
                let holder = Held::busy(busy, Duration::from_millis(u64::from(step)));
                if let Ok(share) = pool.try_take(peer(10 + who), amount, Arc::clone(&holder) as Arc<dyn Holder>) {
                    held[usize::from(who)].push((share, holder));
                }
            };
            for (who, size, step) in steps {
                let who = who % attackers;
                match step {
                    0 if !held[usize::from(who)].is_empty() => drop(held[usize::from(who)].remove(0)),
                    _ => attack(&pool, who, size, step, &mut held),
                }
                held.iter_mut().for_each(end_taken_back);
                let booked: usize = held.iter().flatten().map(|(share, _)| share.amount()).sum();
                prop_assert!(pool.total() <= limit);
                prop_assert_eq!(pool.total(), booked);
            }
            let mut newcomer: Holdings = Vec::new();
            loop {
                let clients = pool.clients() + usize::from(newcomer.is_empty());
                if (newcomer.len() + 1) * clients > limit {
                    break;
                }
                let holder = Held::new();
                let share = pool.try_take(peer(2), 1, Arc::clone(&holder) as Arc<dyn Holder>);
                prop_assert!(share.is_ok(), "the newcomer was refused at {} of {}", newcomer.len(), limit / clients);
                newcomer.push((share.unwrap(), holder));
                // Every attacker asks again at once.
                for who in 0..attackers {
                    attack(&pool, who, limit, 1, &mut held);
                    held.iter_mut().for_each(end_taken_back);
                }
                prop_assert!(newcomer.iter().all(|(_, held)| !held.revoked()));
                prop_assert!(pool.total() <= limit);
            }
        }
    }
}
