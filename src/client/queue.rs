//! Batches waiting for a server: one queue shared by every connection.
//!
//! Each connection pulls a batch whenever its in-flight window has room, so a faster
//! server simply pulls more: that is the whole of the client-side balancing. Batches
//! handed back by a failed connection jump the queue (lowest position first), because
//! the writer is waiting for them.

use std::collections::{BTreeMap, VecDeque};

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::client::batch::Batch;

/// The shared queue of batches to send.
#[derive(Debug)]
pub struct WorkQueue<P = prost::bytes::Bytes> {
    state: Mutex<State<P>>,
    /// Wakes connections waiting in [`WorkQueue::next`]; only those wait on it, so that a
    /// wake-up meant for a batch never goes to a task that would not take one.
    ready: Notify,
    /// Cancelled by [`WorkQueue::finish`].
    done: CancellationToken,
}

#[derive(Debug)]
struct State<P> {
    resend: BTreeMap<u64, Batch<P>>,
    fresh: VecDeque<Batch<P>>,
    finished: bool,
}

impl<P> State<P> {
    fn pop(&mut self) -> Option<Batch<P>> {
        self.resend.pop_first().map(|(_, batch)| batch).or_else(|| self.fresh.pop_front())
    }

    fn is_empty(&self) -> bool {
        self.resend.is_empty() && self.fresh.is_empty()
    }
}

impl<P> Default for WorkQueue<P> {
    fn default() -> Self {
        WorkQueue {
            state: Mutex::new(State { resend: BTreeMap::new(), fresh: VecDeque::new(), finished: false }),
            ready: Notify::new(),
            done: CancellationToken::new(),
        }
    }
}

impl<P> WorkQueue<P> {
    /// An empty queue.
    pub fn new() -> Self {
        WorkQueue::default()
    }

    /// Adds a batch read from the input.
    pub fn push(&self, batch: Batch<P>) {
        self.state.lock().fresh.push_back(batch);
        self.ready.notify_one();
    }

    /// Hands back batches that a failed connection sent but got no answer for.
    pub fn resend(&self, batches: impl IntoIterator<Item = Batch<P>>) {
        let mut state = self.state.lock();
        let before = state.resend.len();
        state.resend.extend(batches.into_iter().map(|batch| (batch.seq, batch)));
        let added = state.resend.len() - before;
        drop(state);
        for _ in 0..added {
            self.ready.notify_one();
        }
    }

    /// Marks the run as over: every waiting and future [`WorkQueue::next`] returns `None`.
    pub fn finish(&self) {
        self.state.lock().finished = true;
        self.done.cancel();
        self.ready.notify_waiters();
    }

    /// True once [`WorkQueue::finish`] was called.
    pub fn is_finished(&self) -> bool {
        self.state.lock().finished
    }

    /// Waits for [`WorkQueue::finish`].
    pub async fn finished(&self) {
        self.done.cancelled().await;
    }

    /// The next batch to send, resends first; `None` once the run is over. Cancel-safe.
    pub async fn next(&self) -> Option<Batch<P>> {
        loop {
            // Registered before looking, so that a push between the look and the wait
            // still wakes this task.
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.state.lock();
                if state.finished {
                    return None;
                }
                if let Some(batch) = state.pop() {
                    if !state.is_empty() {
                        // Pass the wake-up on: another connection may have room.
                        self.ready.notify_one();
                    }
                    return Some(batch);
                }
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::bytes::Bytes;
    use std::sync::Arc;

    fn batch(seq: u64) -> Batch {
        Batch {
            seq,
            payload: Bytes::new(),
            problems: 1,
            lines: 1,
            rejected: vec![],
            end: Default::default(),
            cost: 1,
            kept: Vec::new(),
        }
    }

    #[tokio::test]
    async fn resends_come_first_in_order() {
        let queue: WorkQueue = WorkQueue::new();
        queue.push(batch(5));
        queue.resend([batch(3), batch(1)]);
        let mut order = Vec::new();
        for _ in 0..3 {
            order.push(queue.next().await.unwrap().seq);
        }
        assert_eq!(order, [1, 3, 5]);
    }

    #[tokio::test]
    async fn a_task_waiting_for_the_end_takes_no_wake_up_from_a_consumer() {
        let queue: Arc<WorkQueue> = Arc::new(WorkQueue::new());
        let watcher = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.finished().await })
        };
        tokio::task::yield_now().await;
        let consumer = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.next().await.map(|b| b.seq) })
        };
        tokio::task::yield_now().await;
        queue.push(batch(1));
        // Bounded only so that the lost wake-up this guards against fails instead of hanging.
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), consumer).await;
        assert_eq!(got.expect("the consumer was woken").unwrap(), Some(1));
        queue.finish();
        watcher.await.unwrap();
    }

    #[tokio::test]
    async fn waiting_consumers_wake_on_push_and_on_finish() {
        let queue: Arc<WorkQueue> = Arc::new(WorkQueue::new());
        let consumer = |queue: &Arc<WorkQueue>| {
            let queue = Arc::clone(queue);
            tokio::spawn(async move { queue.next().await.map(|b| b.seq) })
        };
        let first = [consumer(&queue), consumer(&queue)];
        tokio::task::yield_now().await;
        queue.push(batch(7));
        queue.push(batch(8));
        let mut got = Vec::new();
        for consumer in first {
            got.push(consumer.await.unwrap());
        }
        got.sort();
        assert_eq!(got, [Some(7), Some(8)]);
        let late = consumer(&queue);
        tokio::task::yield_now().await;
        queue.finish();
        assert_eq!(late.await.unwrap(), None);
    }
}
