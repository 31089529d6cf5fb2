//! The server a run starts in its own process when it is given no server address.
//!
//! The client library does not link the server: its caller (the `gamesolver-client`
//! binary, a test) hands it an [`EmbeddedStarter`], so that a program which only talks to
//! remote servers carries no accept loop, TLS acceptor, metrics or solver tables.

use std::fmt;
use std::future::Future;
use std::io;
use std::sync::Arc;

use arrow_array::RecordBatch;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tokio::io::DuplexStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::Status;

use crate::columnar::Descriptor;
use crate::games::GameKind;

/// Any error, as an embedded server reports it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Opens a connection to a server in this process without a socket: one end of an
/// in-memory pipe, whose other end the server takes as it takes a connection it accepted.
#[derive(Clone)]
pub struct Pipe(Arc<PipeFn>);

type PipeFn = dyn Fn() -> BoxFuture<'static, io::Result<DuplexStream>> + Send + Sync;

impl Pipe {
    /// A pipe opened by `connect`.
    pub fn new<F, Fut>(connect: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = io::Result<DuplexStream>> + Send + 'static,
    {
        Pipe(Arc::new(move || Box::pin(connect())))
    }

    /// Opens a connection.
    pub(crate) fn connect(&self) -> BoxFuture<'static, io::Result<DuplexStream>> {
        (self.0)()
    }
}

impl fmt::Debug for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pipe(..)")
    }
}

/// Solves a table's batches on a server in this process without a connection: each batch
/// answered by one table of solutions, in order, as a Flight `DoExchange` answers it, with
/// no Arrow IPC, HTTP/2 or pipe in between. A columnar run takes it in place of the pipe.
#[derive(Clone)]
pub struct Exchange(Arc<ExchangeFn>);

type ExchangeFn = dyn Fn(Descriptor, BoxStream<'static, RecordBatch>) -> BoxStream<'static, Result<RecordBatch, Status>>
    + Send
    + Sync;

impl Exchange {
    /// An exchange opened by `exchange`.
    pub fn new<F>(exchange: F) -> Self
    where
        F: Fn(Descriptor, BoxStream<'static, RecordBatch>) -> BoxStream<'static, Result<RecordBatch, Status>>
            + Send
            + Sync
            + 'static,
    {
        Exchange(Arc::new(exchange))
    }

    /// Opens an exchange of `batches` solving `descriptor`.
    pub(crate) fn open(
        &self,
        descriptor: Descriptor,
        batches: BoxStream<'static, RecordBatch>,
    ) -> BoxStream<'static, Result<RecordBatch, Status>> {
        (self.0)(descriptor, batches)
    }
}

impl fmt::Debug for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Exchange(..)")
    }
}

/// A table the embedded server is growing: which game's, how far it covers, and the
/// pile it grows to. A run shows it while it waits (a table to 10^9 takes half a minute).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Growing {
    /// The table's game.
    pub game: GameKind,
    /// Every pile below this is in the table.
    pub covered: u64,
    /// The pile the running extension covers.
    pub target: u64,
}

/// Says which of the embedded server's tables are growing now; cheap to call often.
#[derive(Clone)]
pub struct Growth(Arc<dyn Fn() -> Vec<Growing> + Send + Sync>);

impl Growth {
    /// A growth report made by `growing`.
    pub fn new(growing: impl Fn() -> Vec<Growing> + Send + Sync + 'static) -> Self {
        Growth(Arc::new(growing))
    }

    /// The tables growing now.
    pub(crate) fn growing(&self) -> Vec<Growing> {
        (self.0)()
    }
}

impl fmt::Debug for Growth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Growth(..)")
    }
}

/// A server running in this process, for one run.
pub struct EmbeddedServer {
    /// Where it listens, such as `http://127.0.0.1:PORT`: what the run reports, and
    /// where it connects without a [`pipe`](Self::pipe).
    pub url: String,
    /// How the run connects to it instead of over `url`'s socket, when set.
    pub pipe: Option<Pipe>,
    /// How a columnar run has its batches solved without a connection, when set.
    pub exchange: Option<Exchange>,
    /// Which of its tables are growing, when it can say.
    pub growth: Option<Growth>,
    /// Asks it to shut down gracefully; `ended` resolves once it has.
    pub stop: Box<dyn FnOnce() + Send>,
    /// Resolves when the server has stopped: `Ok` after `stop`, `Err` with the reason when
    /// it failed by itself.
    pub ended: BoxFuture<'static, Result<(), BoxError>>,
}

impl EmbeddedServer {
    /// Spawns `serve` on a task of its own; `serve` is given the future that resolves when
    /// the run asks the server to stop (the `shutdown` future a `serve` function takes).
    pub fn spawn<F, Fut, E>(url: String, serve: F) -> Self
    where
        F: FnOnce(WaitForCancellationFutureOwned) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<BoxError> + Send + 'static,
    {
        let stop = CancellationToken::new();
        let task = tokio::spawn(serve(stop.clone().cancelled_owned()));
        EmbeddedServer {
            url,
            pipe: None,
            exchange: None,
            growth: None,
            stop: Box::new(move || stop.cancel()),
            ended: Box::pin(async move { task.await?.map_err(Into::into) }),
        }
    }

    /// The run connects through `pipe` rather than over the URL's socket.
    pub fn with_pipe(self, pipe: Pipe) -> Self {
        EmbeddedServer { pipe: Some(pipe), ..self }
    }

    /// A columnar run has its batches solved through `exchange` rather than over a
    /// connection.
    pub fn with_exchange(self, exchange: Exchange) -> Self {
        EmbeddedServer { exchange: Some(exchange), ..self }
    }

    /// The run shows the tables `growth` reports growing while it waits for them.
    pub fn with_growth(self, growth: Growth) -> Self {
        EmbeddedServer { growth: Some(growth), ..self }
    }
}

impl fmt::Debug for EmbeddedServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedServer")
            .field("url", &self.url)
            .field("pipe", &self.pipe.is_some())
            .field("exchange", &self.exchange.is_some())
            .finish_non_exhaustive()
    }
}

type StartFn = dyn Fn() -> BoxFuture<'static, Result<EmbeddedServer, BoxError>> + Send + Sync;

/// Starts an [`EmbeddedServer`] on a loopback port; cheap to clone.
#[derive(Clone)]
pub struct EmbeddedStarter(Arc<StartFn>);

impl EmbeddedStarter {
    /// A starter that calls `start` once per run.
    pub fn new<F, Fut>(start: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<EmbeddedServer, BoxError>> + Send + 'static,
    {
        EmbeddedStarter(Arc::new(move || Box::pin(start())))
    }

    /// Starts a server and returns the handle through which the run stops it.
    pub(crate) async fn start(&self) -> Result<Running, BoxError> {
        let EmbeddedServer { url, pipe, exchange, growth, stop, ended } = (self.0)().await?;
        Ok(Running { url, pipe, exchange, growth, stop, ended: Some(ended) })
    }
}

impl fmt::Debug for EmbeddedStarter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EmbeddedStarter(..)")
    }
}

/// An embedded server as a run holds it.
pub(crate) struct Running {
    pub(crate) url: String,
    pub(crate) pipe: Option<Pipe>,
    pub(crate) exchange: Option<Exchange>,
    pub(crate) growth: Option<Growth>,
    stop: Box<dyn FnOnce() + Send>,
    /// `None` once it has resolved.
    ended: Option<BoxFuture<'static, Result<(), BoxError>>>,
}

impl Running {
    /// Waits until the server stops by itself, and says why; never resolves once it has.
    pub(crate) async fn failure(&mut self) -> BoxError {
        let Some(ended) = &mut self.ended else { return std::future::pending().await };
        let result = ended.await;
        self.ended = None;
        match result {
            Err(err) => err,
            Ok(()) => "stopped by itself".into(),
        }
    }

    /// Stops the server and waits for it; its own shutdown grace bounds the wait.
    pub(crate) async fn stop(self) {
        (self.stop)();
        if let Some(ended) = self.ended {
            if let Err(err) = ended.await {
                tracing::warn!("embedded server: {err}");
            }
        }
    }
}
