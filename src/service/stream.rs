//! The stream plumbing every streaming door shares: answers in request order, a read-ahead
//! bounded in bytes and in requests solved at once, the idle timeout, and the end of a
//! stream at its first error.
//!
//! A stream reads its next request only while its decoded problems in flight hold less
//! than [`SolverConfig::stream_in_flight_bytes`](crate::solver::SolverConfig) (and fewer
//! than its window), so a client that sends faster than the server solves is held back
//! by HTTP/2 flow control instead of filling memory. The budget is per stream, so a
//! client that stops reading its answers stalls only itself.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

/// A stream's budget counts memory in these units, so that a `u32` of permits spans
/// terabytes.
const BUDGET_UNIT: usize = 1024;

/// A boxed stream of answers, as tonic's streaming handlers return.
pub(crate) type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// How far one streaming call may read ahead of the answer its client waits for.
#[derive(Debug)]
pub(crate) struct StreamBudget {
    /// Requests in flight at most.
    window: usize,
    /// Units of [`BUDGET_UNIT`] bytes of decoded requests in flight.
    bytes: Arc<Semaphore>,
    units: u32,
}

impl StreamBudget {
    pub(crate) fn new(window: usize, bytes: usize) -> Self {
        let units = u32::try_from((bytes / BUDGET_UNIT).clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
        StreamBudget { window: window.max(1), bytes: Arc::new(Semaphore::new(units as usize)), units }
    }

    /// Waits until `bytes` more may be in flight; a request larger than the whole budget
    /// waits for all of it. The permit gives them back when dropped.
    async fn admit(bytes: Arc<Semaphore>, units: u32, size: usize) -> Option<OwnedSemaphorePermit> {
        let wanted = u32::try_from(size / BUDGET_UNIT + 1).unwrap_or(u32::MAX).min(units);
        // The semaphore belongs to this stream and is never closed.
        bytes.acquire_many_owned(wanted).await.ok()
    }
}

/// Answers each request of a stream with `solve`, in request order; the stream ends after
/// the first error (the client's transport failing, or a failed answer), which becomes
/// the call's status.
///
/// Reading and solving are bounded apart. The next request is read as long as the
/// decoded requests in flight stay within the `budget`'s bytes (each counts at least one
/// [`BUDGET_UNIT`]), so HTTP/2 flow control reaches the client only when that much is
/// waiting; at most the budget's `window` of them are solved at once, each on a task of
/// its own (ended with the stream), so that one stream's requests are solved on every
/// worker, not only on the one polling the stream. Reading ahead of the
/// solving matters: h2 closes a connection whose peer keeps many small DATA frames unread
/// (`ENHANCE_YOUR_CALM`, "too_many_data_frames": a budget of half the connection window
/// at 256 bytes a frame), which a grpc-go client streaming 25-byte problems reached with
/// only 64 read ahead.
///
/// A stream with nothing in flight that sends nothing for `idle_timeout` ends with
/// [`stream_idle_status`].
pub(crate) fn solve_in_order<Req, Resp, Fut>(
    requests: impl Stream<Item = Result<Req, Status>> + Send + 'static,
    budget: StreamBudget,
    idle_timeout: Option<Duration>,
    weigh: impl Fn(&Req) -> usize + Send + 'static,
    mut solve: impl FnMut(Req) -> Fut + Send + 'static,
) -> ResponseStream<Resp>
where
    Req: Send + 'static,
    Resp: Send + 'static,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
{
    let StreamBudget { window, bytes, units } = budget;
    let solving = Arc::new(Semaphore::new(window));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let answered = Arc::clone(&in_flight);
    let requests = IdleTimeout { requests: Box::pin(requests), timeout: idle_timeout, in_flight, idle: None };
    let answers = requests
        .then(move |request| {
            let size = request.as_ref().map_or(0, &weigh);
            let admitted = StreamBudget::admit(Arc::clone(&bytes), units, size);
            async move { (request, admitted.await) }
        })
        .map(move |(request, admitted)| {
            let answer = request.map(&mut solve);
            let solving = Arc::clone(&solving);
            async move {
                let _admitted = admitted;
                let answer = answer?;
                // The semaphore belongs to this stream and is never closed.
                let _solving = solving.acquire_owned().await;
                // A task of its own (see above), aborted if the stream is dropped.
                let task = tokio::spawn(tracing::Instrument::in_current_span(answer));
                match tokio_util::task::AbortOnDropHandle::new(task).await {
                    Ok(answer) => answer,
                    Err(err) => Err(Status::internal(format!("solving a request failed: {err}"))),
                }
            }
        })
        // Every request in flight holds at least one unit, so `units` bounds this too.
        .buffered(units as usize)
        .inspect(move |_| {
            answered.fetch_sub(1, Ordering::SeqCst);
        });
    Box::pin(stop_after_error(answers))
}

/// The status of a call that the stream idle timeout ends.
pub(crate) fn stream_idle_status(timeout: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "stream idle: the client sent nothing for {timeout:?} while the server had nothing left to answer"
    ))
}

/// A stream of requests that fails with [`stream_idle_status`] when none comes for
/// `timeout` while `in_flight` (requests read, not yet answered) is zero.
struct IdleTimeout<S> {
    requests: Pin<Box<S>>,
    timeout: Option<Duration>,
    in_flight: Arc<AtomicUsize>,
    /// Armed when the stream went idle.
    idle: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S: Stream<Item = Result<T, Status>>, T> Stream for IdleTimeout<S> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Poll::Ready(item) = this.requests.as_mut().poll_next(cx) {
            this.idle = None;
            if item.is_some() {
                this.in_flight.fetch_add(1, Ordering::SeqCst);
            }
            return Poll::Ready(item);
        }
        let Some(timeout) = this.timeout else { return Poll::Pending };
        if this.in_flight.load(Ordering::SeqCst) > 0 {
            this.idle = None;
            return Poll::Pending;
        }
        let idle = this.idle.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match idle.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.timeout = None;
                this.in_flight.fetch_add(1, Ordering::SeqCst);
                Poll::Ready(Some(Err(stream_idle_status(timeout))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Ends a response stream after its first error, which becomes the call's status.
fn stop_after_error<T>(
    items: impl Stream<Item = Result<T, Status>>,
) -> impl Stream<Item = Result<T, Status>> {
    items.scan(false, |failed, item| {
        let next = (!*failed).then(|| {
            *failed = item.is_err();
            item
        });
        futures::future::ready(next)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// Pulls through `solve_in_order` with answers that never come, and counts how many
    /// requests it read from the client and how many it started solving.
    async fn requests_read_and_started(budget: StreamBudget, weight: usize) -> (usize, usize) {
        let (read, started) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let counter = Arc::clone(&read);
        let requests = futures::stream::iter(0..1000).map(move |i| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Status>(i)
        });
        let counter = Arc::clone(&started);
        let never = move |_| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                futures::future::pending::<Result<u32, Status>>().await
            }
        };
        let mut answers = solve_in_order(requests, budget, None, move |_| weight, never);
        let _ = tokio::time::timeout(Duration::from_millis(50), answers.next()).await;
        (read.load(Ordering::SeqCst), started.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_stream_reads_ahead_only_as_far_as_its_byte_budget() {
        // Each request takes 3 units of 10: three are admitted, the fourth is read and waits.
        let budget = StreamBudget::new(64, 10 * BUDGET_UNIT);
        assert_eq!(requests_read_and_started(budget, 2 * BUDGET_UNIT).await, (4, 3));
    }

    #[tokio::test]
    async fn a_stream_reads_past_its_window_but_solves_only_that_many_at_once() {
        // 100 units, one a request: 100 read and admitted, 5 solving.
        let budget = StreamBudget::new(5, 100 * BUDGET_UNIT);
        assert_eq!(requests_read_and_started(budget, 1).await, (100, 5));
    }
}
