//! One server: a `SolveBatchStream` call fed from the shared queue, kept alive across
//! failures.
//!
//! Batches travel as the bytes encoded on the reading thread (a pass-through codec), and
//! answers come back as bytes decoded on the writing thread: the async workers only move
//! frames, which leaves the CPU to parsing, solving and formatting. A batch stays in the
//! connection's window until its answer, checked against it ([`answer_check`]), is handed
//! to the writer; when the call fails, every batch of the window goes back to the queue,
//! so that each is answered exactly once, by whichever server gets it next. A server that
//! answers wrongly is not asked again, on any of its connections.
//!
//! [`answer_check`]: crate::client::answer_check
//!
//! # Layout
//! This file is a connection's life: `run`, its attempts one after another (connect, open
//! the call, exchange batches for answers), the hand-back of a failed call's window, and
//! the backoff or the giving up after it. Below it: `door.rs` what a call sends and how
//! (the gRPC door; Flight's is `client::flight`), `server.rs` a server and what its
//! connections learn of it together, `failure.rs` why an attempt ended and which failures
//! no retry fixes, `error.rs` why a server was given up on, `config.rs` the settings.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::client::answer_check::WrongAnswer;
use crate::client::batch::Batch;
use crate::client::output::{Answered, ToWriter};
use crate::client::queue::WorkQueue;

mod config;
mod door;
mod error;
mod failure;
mod server;

pub use config::{ConnectionConfig, TlsFiles};
pub(crate) use door::{Answers, Door, Grpc};
pub use error::ConnectionError;
use failure::fatal;
pub(crate) use failure::Failure;
pub use server::Server;

/// First wait after a failure; doubled after each failure in a row, up to the maximum.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The shortest silence (with batches in flight, or while connecting) that counts as a
/// failure, so that `--retry-for 0` (give up at the first failure) does not turn every
/// answer or handshake slower than an instant into one.
const MIN_SILENCE: Duration = Duration::from_secs(1);

/// Feeds `server` from `queue` until the queue is finished; answers go to `writer`.
/// Reconnects with backoff after failures. Until a connection to the server has been made
/// (by any connection of this run), it is given up on after the connect deadline, counted
/// from the start: a server never reached is most likely a wrong address. Once reached, it
/// is given up on after `retry_for` without an answer, counted from the last answer (or
/// the first batch sent after it, or the start of a connection that never completes), so
/// that a server that goes silent at any step is given up on as promptly as one that fails.
pub(crate) async fn run<D: Door>(
    server: Server,
    door: Arc<D>,
    queue: Arc<WorkQueue<D::Payload>>,
    writer: mpsc::Sender<ToWriter<D::Payload>>,
    config: ConnectionConfig,
) -> Result<(), ConnectionError> {
    let mut connection = Connection::new(server, door, queue, writer, config);
    loop {
        let mut attempt = Attempt::default();
        let result = connection.attempt(&mut attempt).await;
        let unanswered = connection.hand_back();
        let failure = match result {
            Ok(()) => return Ok(()),
            // The writer stops first when the run ends early (a read error, a closed
            // output): not this server's failure, nothing to report.
            Err(Failure::WriterGone) => return Ok(()),
            Err(failure) => failure,
        };
        let pause = connection.recover(failure, &attempt, unanswered).await?;
        if !connection.wait(pause).await {
            return Ok(());
        }
    }
}

/// One connection slot to a server, from the run's start to its end or to giving up on
/// the server: what is kept from one attempt to the next.
struct Connection<D: Door> {
    server: Server,
    door: Arc<D>,
    queue: Arc<WorkQueue<D::Payload>>,
    writer: mpsc::Sender<ToWriter<D::Payload>>,
    config: ConnectionConfig,
    /// The batches sent on the current call and not yet answered.
    window: VecDeque<Batch<D::Payload>>,
    /// When the run started: the connect deadline counts from it.
    started: Instant,
    /// When the failures in a row began, once the server was reached.
    failing_since: Option<Instant>,
    /// The wait before the next attempt.
    backoff: Duration,
    /// Until the server has answered once, a failure on a plaintext URL may mean that the
    /// server speaks TLS: checked once, on the first failure.
    checked_for_tls: bool,
}

/// What one attempt leaves for the decision after it.
#[derive(Debug, Default)]
struct Attempt {
    /// The server answered a batch.
    answered: bool,
    /// When the oldest wait on the server began (the connection, the last answer, or the
    /// send into an empty window); `None` while nothing is awaited of it.
    waiting_since: Option<Instant>,
}

/// An open call: its answers, and its requests' sender (`None` once the run has no batch
/// left: the call is half-closed).
struct Call<P> {
    answers: Answers<P>,
    sender: Option<tokio::sync::mpsc::Sender<P>>,
    /// The most batches sent and not yet answered.
    capacity: usize,
}

impl<D: Door> Connection<D> {
    fn new(
        server: Server,
        door: Arc<D>,
        queue: Arc<WorkQueue<D::Payload>>,
        writer: mpsc::Sender<ToWriter<D::Payload>>,
        config: ConnectionConfig,
    ) -> Self {
        let checked_for_tls = server.is_tls();
        Connection {
            server,
            door,
            queue,
            writer,
            config,
            window: VecDeque::new(),
            started: Instant::now(),
            failing_since: None,
            backoff: FIRST_BACKOFF,
            checked_for_tls,
        }
    }

    /// One connection and one call. Every wait on the server (`attempt.waiting_since`)
    /// ends after the silence the retry period allows, whatever the server does
    /// meanwhile: a server can keep its connection alive (answer pings) and still never
    /// complete a handshake, never open the call or never answer on it.
    async fn attempt(&mut self, attempt: &mut Attempt) -> Result<(), Failure> {
        let Some(link) = self.connect(attempt).await? else { return Ok(()) };
        let Some(mut call) = self.open_call(link, attempt).await? else { return Ok(()) };
        self.exchange(&mut call, attempt).await
    }

    /// The longest silence of the server that is not yet a failure.
    fn silence(&self) -> Duration {
        self.config.retry_for.max(MIN_SILENCE)
    }

    /// Connects; `None` when the run ends first. A server not reached yet gets what is
    /// left of the connect deadline to complete a connection.
    async fn connect(&self, attempt: &mut Attempt) -> Result<Option<D::Link>, Failure> {
        let connect_within = match self.server.reached() {
            true => self.silence(),
            false => self.config.connect_deadline.saturating_sub(self.started.elapsed()).max(MIN_SILENCE),
        };
        attempt.waiting_since = Some(Instant::now());
        // connect_timeout bounds only the TCP connect: the TLS and HTTP/2 handshakes are
        // bounded here.
        let connect = async { self.door.link(&self.server).await.map_err(Failure::Connect) };
        let link = tokio::select! {
            () = self.server.distrusted() => return Err(Failure::Distrusted),
            connected = tokio::time::timeout(connect_within, connect) => {
                connected.map_err(|_| Failure::NoConnection(connect_within))??
            }
            () = self.queue.finished() => return Ok(None),
        };
        // Connected: an idle connection waits for work, not for the server.
        attempt.waiting_since = None;
        self.server.mark_reached();
        Ok(Some(link))
    }

    /// Opens the call on `link` with the run's next batch, which goes first so that an idle
    /// connection holds no call; `None` when the run has no batch left.
    async fn open_call(
        &mut self,
        link: D::Link,
        attempt: &mut Attempt,
    ) -> Result<Option<Call<D::Payload>>, Failure> {
        let first = tokio::select! {
            biased;
            () = self.server.distrusted() => return Err(Failure::Distrusted),
            first = self.queue.next() => first,
        };
        let Some(first) = first else { return Ok(None) };
        let capacity = self.config.window.max(1);
        let (sender, requests) = tokio::sync::mpsc::channel::<D::Payload>(capacity);
        let sender = Some(sender);
        send(&sender, &first);
        self.window.push_back(first);
        let sent = Instant::now();
        attempt.waiting_since = Some(sent);
        // The call opens with the server's response headers, which a server may never send.
        let silence = self.silence();
        let opening = self.door.open(link, &self.config, requests);
        let opened = tokio::select! {
            biased;
            () = self.server.distrusted() => return Err(Failure::Distrusted),
            opened = tokio::time::timeout_at(tokio::time::Instant::from_std(sent + silence), opening) => {
                opened.map_err(|_| Failure::Silent(silence))?
            }
        };
        Ok(Some(Call { answers: opened?, sender, capacity }))
    }

    /// Sends the run's batches while the window has room and hands their answers to the
    /// writer, until every batch of the run is answered or the call fails.
    async fn exchange(&mut self, call: &mut Call<D::Payload>, attempt: &mut Attempt) -> Result<(), Failure> {
        let silence = self.silence();
        loop {
            let silent_until =
                attempt.waiting_since.map(|since| tokio::time::Instant::from_std(since + silence));
            tokio::select! {
                biased;
                () = self.server.distrusted() => return Err(Failure::Distrusted),
                answer = call.answers.next() => match answer {
                    Some(Ok(solutions)) => self.answered(solutions, attempt)?,
                    None if call.sender.is_none() && self.window.is_empty() => return Ok(()),
                    None => return Err(Failure::EndedEarly),
                    Some(Err(Failure::Malformed(reason))) => {
                        let seq = self.window.front().map_or(0, |batch| batch.seq);
                        return Err(self.distrust(WrongAnswer::Table { seq, reason }));
                    }
                    Some(Err(failure)) => return Err(failure),
                },
                next = self.queue.next(), if call.sender.is_some() && self.window.len() < call.capacity => match next {
                    Some(batch) => {
                        send(&call.sender, &batch);
                        self.window.push_back(batch);
                        attempt.waiting_since.get_or_insert_with(Instant::now);
                    }
                    // The run is complete: half-close, and the server ends the call.
                    None => call.sender = None,
                },
                () = tokio::time::sleep_until(silent_until.unwrap_or_else(tokio::time::Instant::now)), if silent_until.is_some() => {
                    return Err(Failure::Silent(silence));
                }
            }
        }
    }

    /// Takes `solutions` as the answer to the oldest batch of the window and hands both to
    /// the writer. The answer is checked before its batch leaves the window: a wrong
    /// answer's batch is resent.
    fn answered(&mut self, solutions: D::Payload, attempt: &mut Attempt) -> Result<(), Failure> {
        let Some(batch) = self.window.pop_front() else {
            return Err(self.distrust(WrongAnswer::Unrequested));
        };
        if let Err(wrong) = self.door.check(&batch, &solutions) {
            self.window.push_front(batch);
            return Err(self.distrust(wrong));
        }
        attempt.answered = true;
        attempt.waiting_since = (!self.window.is_empty()).then(Instant::now);
        self.writer.send(ToWriter::Answered(Answered { batch, solutions })).map_err(|_| Failure::WriterGone)
    }

    /// Marks the server as answering wrongly, for all its connections.
    fn distrust(&self, wrong: WrongAnswer) -> Failure {
        self.server.distrust(wrong);
        Failure::Distrusted
    }

    /// Hands whatever was sent and not answered to whichever connection is free first;
    /// returns how many batches.
    fn hand_back(&mut self) -> usize {
        let unanswered = self.window.len();
        self.queue.resend(self.window.drain(..));
        unanswered
    }

    /// After a failed attempt: the error to give up with, or how long to wait before the
    /// next attempt.
    async fn recover(
        &mut self,
        failure: Failure,
        attempt: &Attempt,
        unanswered: usize,
    ) -> Result<Duration, ConnectionError> {
        if let Some(fatal) = fatal(&self.server, &failure) {
            return Err(fatal);
        }
        if attempt.answered {
            self.failing_since = None;
            self.backoff = FIRST_BACKOFF;
            self.checked_for_tls = true;
        }
        self.check_for_tls().await?;
        match self.server.reached() {
            false => self.pause_unreached(&failure),
            true => self.pause_reached(&failure, attempt, unanswered),
        }
    }

    /// The error when a plaintext URL names a server that speaks TLS; asked once, on the
    /// first failure before any answer.
    async fn check_for_tls(&mut self) -> Result<(), ConnectionError> {
        if self.checked_for_tls {
            return Ok(());
        }
        self.checked_for_tls = true;
        if !self.server.speaks_tls().await {
            return Ok(());
        }
        let url = self.server.url().to_owned();
        let https = format!("https://{}", url.trim_start_matches("http://"));
        Err(ConnectionError::SpeaksTls { url, https })
    }

    /// The wait before trying a server never reached again: the backoff, within what is left
    /// of the connect deadline; the error once that is spent.
    fn pause_unreached(&self, failure: &Failure) -> Result<Duration, ConnectionError> {
        let left = self.config.connect_deadline.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            return Err(ConnectionError::NotReached {
                url: self.server.url().to_owned(),
                deadline: self.config.connect_deadline,
                reason: failure.unreached(&self.server),
            });
        }
        let (server, backoff) = (&self.server, self.backoff);
        // Not worth a warning yet: if it stays so, the run ends with one message.
        tracing::debug!(server = %server.url(), "{}; retrying in {backoff:?}", failure.describe(server));
        Ok(backoff.min(left))
    }

    /// The wait before trying a server reached before again: the backoff, with a warning;
    /// the error once it has failed for the whole retry period, counted from the wait on
    /// it that began the failures.
    fn pause_reached(
        &mut self,
        failure: &Failure,
        attempt: &Attempt,
        unanswered: usize,
    ) -> Result<Duration, ConnectionError> {
        let since =
            *self.failing_since.get_or_insert_with(|| attempt.waiting_since.unwrap_or_else(Instant::now));
        let (server, backoff) = (&self.server, self.backoff);
        if since.elapsed() >= self.config.retry_for {
            return Err(ConnectionError::Unreachable {
                url: server.url().to_owned(),
                elapsed: since.elapsed(),
                last: failure.describe(server),
            });
        }
        let handed_back = match unanswered {
            0 => String::new(),
            n => format!("; {n} unanswered batches handed back"),
        };
        server.warn(|| format!("{}{handed_back}; retrying in {backoff:?}", failure.describe(server)));
        Ok(backoff)
    }

    /// Waits `pause`, then doubles the backoff; false when the run ends first.
    async fn wait(&mut self, pause: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = self.queue.finished() => return false,
        }
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        true
    }
}

/// Queues `batch` on the call. The channel holds at most the window, which has room, so
/// this cannot block; if the call is gone, the error surfaces on the answer side.
fn send<P: Clone>(sender: &Option<tokio::sync::mpsc::Sender<P>>, batch: &Batch<P>) {
    if let Some(sender) = sender {
        let _ = sender.try_send(batch.payload.clone());
    }
}
